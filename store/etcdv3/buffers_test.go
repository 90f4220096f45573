package etcdv3

import (
	"bytes"
	"fmt"
	"testing"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
)

// A received message over 32 KiB gets a buffer of about its size, not
// gRPC's default 1 MiB tier (a CNI process reading a node's IPAM blocks
// paid for zeroing and faulting in 1 MiB).
func TestRecvBuffersFitTheMessage(t *testing.T) {
	for _, size := range []int{100, 20 << 10, 40 << 10, 300 << 10} {
		b := recvBuffers.Get(size)
		if len(*b) != size || cap(*b) > 2*size+4<<10 {
			t.Errorf("a %d-byte message gets a buffer of len %d cap %d", size, len(*b), cap(*b))
		}
		recvBuffers.Put(b)
	}
}

// A message that arrived in several frames decodes as gRPC's own codec
// decodes it.
func TestRecvCodecJoinsFrames(t *testing.T) {
	base := encoding.GetCodecV2(proto.Name)
	want := &etcdserverpb.RangeResponse{Count: 3}
	for i := range 3 {
		want.Kvs = append(want.Kvs, &mvccpb.KeyValue{Key: []byte(fmt.Sprintf("/k/%d", i)), Value: bytes.Repeat([]byte{'v'}, 30<<10), ModRevision: int64(i + 1)})
	}
	enc, err := base.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	flat := enc.Materialize()
	spy := &countingPool{BufferPool: recvBuffers}
	defer func(p mem.BufferPool) { recvBuffers = p }(recvBuffers)
	recvBuffers = spy
	for _, frames := range []int{1, 2, 7} {
		var data mem.BufferSlice
		step := (len(flat) + frames - 1) / frames
		for off := 0; off < len(flat); off += step {
			data = append(data, mem.SliceBuffer(flat[off:min(off+step, len(flat))]))
		}
		got := &etcdserverpb.RangeResponse{}
		if err := (recvCodec{base}).Unmarshal(data, got); err != nil {
			t.Fatalf("%d frames: %v", frames, err)
		}
		if got.Count != 3 || len(got.Kvs) != 3 || string(got.Kvs[2].Key) != "/k/2" || len(got.Kvs[1].Value) != 30<<10 || got.Kvs[2].ModRevision != 3 {
			t.Fatalf("%d frames: decoded %d kvs, count %d", frames, len(got.Kvs), got.Count)
		}
	}
	if spy.gets != 2 || spy.largest != len(flat) {
		t.Errorf("joined in recvBuffers %d times (largest %d bytes), want the 2 multi-frame messages of %d bytes", spy.gets, spy.largest, len(flat))
	}
}

type countingPool struct {
	mem.BufferPool
	gets, largest int
}

func (p *countingPool) Get(n int) *[]byte {
	p.gets++
	p.largest = max(p.largest, n)
	return p.BufferPool.Get(n)
}
