package iptables

import (
	"encoding/binary"
	"fmt"
	"syscall"

	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// genSocket is a NETLINK_NETFILTER socket kept open for NFT_MSG_GETGEN, in
// the network namespace it was made in. nftGeneration makes a socket per
// question, and a Table asks twice per apply that changes it: making the
// socket and closing it cost more than the question, and after a commit
// that deleted chains (a DEL's) the close took about 10 ms here, the
// agent's thread blocked in close(2) meanwhile (the release of a
// NETLINK_NETFILTER socket seems to wait for nf_tables' pending destruction
// work: with the socket kept, that wait moves to the next commit, in the
// restore's process). Plain blocking syscalls, not the runtime's poller:
// the reply is immediate.
type genSocket struct {
	fd  int
	ns  uint64 // the network namespace (threadNetns) the socket lives in
	seq uint32
}

// genTimeout bounds the wait for the kernel's reply.
var genTimeout = unix.Timeval{Sec: 5}

func newGenSocket(ns uint64) (*genSocket, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_NETFILTER)
	if err != nil {
		return nil, fmt.Errorf("nf_tables generation: socket: %w", err)
	}
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &genTimeout); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("nf_tables generation: receive timeout: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("nf_tables generation: bind: %w", err)
	}
	return &genSocket{fd: fd, ns: ns}, nil
}

func (g *genSocket) close() { unix.Close(g.fd) }

// generation asks the kernel for the nf_tables generation of the socket's
// namespace; replies to earlier questions (one that timed out) are skipped
// by sequence number.
func (g *genSocket) generation() (uint32, error) {
	g.seq++
	req := nl.NewNetlinkRequest(unix.NFNL_SUBSYS_NFTABLES<<8|unix.NFT_MSG_GETGEN, 0)
	req.Seq = g.seq
	req.AddData(&nl.Nfgenmsg{NfgenFamily: unix.AF_UNSPEC, Version: unix.NFNETLINK_V0})
	if err := unix.Sendto(g.fd, req.Serialize(), 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return 0, fmt.Errorf("nf_tables generation: send: %w", err)
	}
	buf := make([]byte, 4096)
	for {
		n, _, err := unix.Recvfrom(g.fd, buf, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("nf_tables generation: receive: %w", err)
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			return 0, fmt.Errorf("nf_tables generation: %w", err)
		}
		for _, m := range msgs {
			if m.Header.Seq != g.seq {
				continue
			}
			if m.Header.Type == unix.NLMSG_ERROR {
				if len(m.Data) >= 4 {
					if code := int32(binary.NativeEndian.Uint32(m.Data)); code != 0 {
						return 0, fmt.Errorf("nf_tables generation: %w", syscall.Errno(-code))
					}
				}
				continue // an acknowledgement
			}
			return parseGen(m.Data)
		}
	}
}

// parseGen reads NFTA_GEN_ID from an NFT_MSG_NEWGEN message's payload.
func parseGen(m []byte) (uint32, error) {
	if len(m) < nl.SizeofNfgenmsg {
		return 0, fmt.Errorf("nf_tables generation: short reply")
	}
	attrs, err := nl.ParseRouteAttr(m[nl.SizeofNfgenmsg:])
	if err != nil {
		return 0, fmt.Errorf("nf_tables generation: %w", err)
	}
	for _, a := range attrs {
		if a.Attr.Type == unix.NFTA_GEN_ID && len(a.Value) == 4 {
			return binary.BigEndian.Uint32(a.Value), nil
		}
	}
	return 0, fmt.Errorf("nf_tables generation: no NFTA_GEN_ID in the reply")
}

// generation is the nf_tables generation of the calling thread's network
// namespace, asked over the kept socket (made again when the thread is in
// another namespace than the socket, or after a failure).
func (s *Sessions) generation() (uint32, error) {
	ns, err := threadNetns()
	if err != nil {
		return nftGeneration()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gen != nil && s.gen.ns != ns {
		s.gen.close()
		s.gen = nil
	}
	if s.gen == nil {
		if s.gen, err = newGenSocket(ns); err != nil {
			return 0, err
		}
	}
	gen, err := s.gen.generation()
	if err != nil {
		s.gen.close()
		s.gen = nil
	}
	return gen, err
}
