package etcdv3

import "testing"

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
