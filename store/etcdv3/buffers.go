package etcdv3

import (
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
)

// recvBuffers is where the etcd client's gRPC takes a buffer to join the
// frames of a message it receives. gRPC's default pool rounds anything
// over 32 KiB up to a 1 MiB buffer and zeroes all of it on every use: a
// node's IPAM blocks (tens of KiB at a few hundred pods) then cost each
// read a 1 MiB clear, and a CNI process (the in-process fallback) 1 MiB of
// memory faulted in. Above 32 KiB this pool allocates at the message's
// size and reuses a buffer when a later message fits it.
var recvBuffers = mem.NewTieredBufferPool(256, 4<<10, 16<<10, 32<<10)

// recvCodec is gRPC's proto codec, except that a message received in
// several frames is joined in a recvBuffers buffer: the codec's own
// Unmarshal joins them in gRPC's default pool, whatever the connection's
// pool (experimental.WithBufferPool covers the transport's frames only,
// at most 16 KiB each, and importing it delays the CNI plugin's
// initialisation behind the etcd server's: cni/inproc).
type recvCodec struct{ encoding.CodecV2 }

func (c recvCodec) Unmarshal(data mem.BufferSlice, v any) error {
	if len(data) <= 1 {
		return c.CodecV2.Unmarshal(data, v) // nothing to join
	}
	buf := data.MaterializeToBuffer(recvBuffers)
	defer buf.Free()
	return c.CodecV2.Unmarshal(mem.BufferSlice{buf}, v)
}
