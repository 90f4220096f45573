package e2e

import (
	byteorder "encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/calico-aio/calico-aio/store/api"
)

// A pod cannot reach what the node binds to 127.0.0.1 (the class of
// CVE-2020-8558): host veths have route_localnet=1, so a hand-made SYN to
// 127.0.0.1 sent to the pod's gateway would be answered by the node's
// loopback-only service whenever workload-to-host traffic is accepted.
// The agent drops it unless conntrack says it was DNATed there; a
// "service" DNATed to 127.0.0.1 still works.
func TestWorkloadCannotReachHostLoopback(t *testing.T) {
	t.Parallel()
	const svcPort, plainPort, svcIP, svcVIPPort = 7070, 7071, "10.96.0.10", 80
	e, l := policyEnv(t, 61, "10.131.0.0/24", "")
	f := kindOf("FelixConfiguration").NewObject().(*api.FelixConfiguration)
	f.Metadata.Name, f.Spec.DefaultEndpointToHostAction = "default", "Accept"
	e.apply(f)
	a := e.newPod(l, "a")
	listenPeer(t, e.host.ns, hostPort("127.0.0.1", svcPort))
	listenPeer(t, e.host.ns, hostPort(e.host.hostIP, plainPort))
	// A "service": its address DNATed to the loopback-only listener.
	mustNS(t, e.host.ns, "iptables", "-t", "nat", "-A", "PREROUTING", "-d", svcIP, "-p", "tcp", "--dport", strconv.Itoa(svcVIPPort),
		"-j", "DNAT", "--to-destination", hostPort("127.0.0.1", svcPort))
	expectTraffic(t, "workload to host accepted, DNAT to the host's loopback works",
		allow("pod->host", tcpProbe(a.ns, hostPort(e.host.hostIP, plainPort))),
		allow("pod->service DNATed to 127.0.0.1", tcpProbe(a.ns, hostPort(svcIP, svcVIPPort))))

	raw := openRawIPv4(t, a.ns, "eth0")
	src := netip.MustParseAddr(a.ip)
	dst := netip.MustParseAddr("127.0.0.1")
	const sport = 40001
	syn := tcpSYN(src, dst, sport, svcPort)
	dropped := func() int { return loopbackDrops(t, e.host.ns) }
	before := dropped()
	var answer string
	eventually(t, 10*time.Second, "the raw SYN to 127.0.0.1 dropped or answered", func() error {
		raw.send(t, syn)
		if reply, ok := raw.synAck(dst, src, svcPort, sport, 200*time.Millisecond); ok {
			answer = reply
			return nil
		}
		if n := dropped(); n <= before {
			return fmt.Errorf("neither answered nor dropped by the loopback rule (its counter: %d)", n)
		}
		return nil
	})
	if answer != "" {
		t.Fatalf("the pod got an answer from the host's loopback-only service: %s", answer)
	}
	if out := mustNS(t, e.host.ns, "ss", "-Htn", "state", "syn-recv", "sport", "=", ":"+strconv.Itoa(svcPort)); strings.TrimSpace(out) != "" {
		t.Errorf("the host's loopback listener saw the SYN:\n%s", out)
	}
	// The DNATed service still works after the drops.
	expectTraffic(t, "DNAT to the host's loopback still works",
		allow("pod->service DNATed to 127.0.0.1", tcpProbe(a.ns, hostPort(svcIP, svcVIPPort))))
}

// loopbackDrops is the packet counter of the agent's rule dropping
// workload traffic to 127.0.0.0/8 (0 when there is no such rule).
func loopbackDrops(t testing.TB, n ns.NetNS) int {
	t.Helper()
	re := regexp.MustCompile(`^\[(\d+):\d+\] -A cali-wl-to-host -d 127\.0\.0\.0/8 .*-j DROP`)
	for _, line := range strings.Split(mustNS(t, n, "iptables-save", "-c", "-t", "filter"), "\n") {
		if m := re.FindStringSubmatch(line); m != nil {
			v, _ := strconv.Atoi(m[1])
			return v
		}
	}
	return 0
}

// rawIPv4 is an AF_PACKET socket on a pod's interface: it sends whole
// Ethernet frames to the pod's gateway (the host veth) and reads the IPv4
// frames arriving, before the pod's own IP stack can drop them (it drops a
// source of 127.0.0.1 as martian).
type rawIPv4 struct {
	fd      int
	ifindex int
	srcMAC  net.HardwareAddr
}

// calicoGatewayMAC is the host veth's MAC, which the pod's 169.254.1.1
// resolves to.
var calicoGatewayMAC = net.HardwareAddr{0xee, 0xee, 0xee, 0xee, 0xee, 0xee}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

func openRawIPv4(t testing.TB, n ns.NetNS, ifname string) *rawIPv4 {
	t.Helper()
	r := &rawIPv4{fd: -1}
	mustDo(t, n, func() error {
		ifc, err := net.InterfaceByName(ifname)
		if err != nil {
			return err
		}
		r.ifindex, r.srcMAC = ifc.Index, ifc.HardwareAddr
		fd, err := syscall.Socket(syscall.AF_PACKET, syscall.SOCK_RAW, int(htons(syscall.ETH_P_IP)))
		if err != nil {
			return fmt.Errorf("AF_PACKET socket: %w", err)
		}
		r.fd = fd
		return syscall.Bind(fd, &syscall.SockaddrLinklayer{Protocol: htons(syscall.ETH_P_IP), Ifindex: r.ifindex})
	})
	t.Cleanup(func() { syscall.Close(r.fd) })
	return r
}

// send sends one IPv4 packet to the gateway MAC.
func (r *rawIPv4) send(t testing.TB, ipPacket []byte) {
	t.Helper()
	frame := append(append(append([]byte{}, calicoGatewayMAC...), r.srcMAC...), 0x08, 0x00)
	frame = append(frame, ipPacket...)
	to := &syscall.SockaddrLinklayer{Protocol: htons(syscall.ETH_P_IP), Ifindex: r.ifindex, Halen: 6}
	copy(to.Addr[:], calicoGatewayMAC)
	if err := syscall.Sendto(r.fd, frame, 0, to); err != nil {
		t.Fatalf("sending the raw frame: %v", err)
	}
}

// synAck reads arriving frames for up to wait and reports a TCP SYN-ACK
// from src:sport to dst:dport.
func (r *rawIPv4) synAck(src, dst netip.Addr, sport, dport int, wait time.Duration) (string, bool) {
	tv := syscall.NsecToTimeval(int64(wait))
	_ = syscall.SetsockoptTimeval(r.fd, syscall.SOL_SOCKET, syscall.SO_RCVTIMEO, &tv)
	buf := make([]byte, 2048)
	for deadline := time.Now().Add(wait); time.Now().Before(deadline); {
		n, _, err := syscall.Recvfrom(r.fd, buf, 0)
		if errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil || n < 14+20+20 {
			continue
		}
		ip := buf[14:n]
		ihl := int(ip[0]&0x0f) * 4
		if ip[9] != syscall.IPPROTO_TCP || len(ip) < ihl+20 {
			continue
		}
		from, _ := netip.AddrFromSlice(ip[12:16])
		to, _ := netip.AddrFromSlice(ip[16:20])
		tcp := ip[ihl:]
		fp, tp, flags := int(byteorder.BigEndian.Uint16(tcp[0:2])), int(byteorder.BigEndian.Uint16(tcp[2:4])), tcp[13]
		if from == src && to == dst && fp == sport && tp == dport && flags&0x12 == 0x12 {
			return fmt.Sprintf("SYN-ACK %s:%d -> %s:%d", from, fp, to, tp), true
		}
	}
	return "", false
}

// tcpSYN is an IPv4 packet holding a TCP SYN, checksums filled in.
func tcpSYN(src, dst netip.Addr, sport, dport int) []byte {
	tcp := make([]byte, 20)
	byteorder.BigEndian.PutUint16(tcp[0:2], uint16(sport))
	byteorder.BigEndian.PutUint16(tcp[2:4], uint16(dport))
	byteorder.BigEndian.PutUint32(tcp[4:8], 0x01020304) // sequence number
	tcp[12] = 5 << 4                                    // data offset: 5 words
	tcp[13] = 0x02                                      // SYN
	byteorder.BigEndian.PutUint16(tcp[14:16], 64240)    // window
	s, d := src.As4(), dst.As4()
	pseudo := append(append(append([]byte{}, s[:]...), d[:]...), 0, syscall.IPPROTO_TCP, 0, byte(len(tcp)))
	byteorder.BigEndian.PutUint16(tcp[16:18], inetChecksum(append(pseudo, tcp...)))

	ip := make([]byte, 20)
	ip[0] = 0x45 // version 4, 5 words
	byteorder.BigEndian.PutUint16(ip[2:4], uint16(len(ip)+len(tcp)))
	byteorder.BigEndian.PutUint16(ip[4:6], 0x4242) // identification
	ip[6] = 0x40                                   // don't fragment
	ip[8] = 64                                     // TTL
	ip[9] = syscall.IPPROTO_TCP
	copy(ip[12:16], s[:])
	copy(ip[16:20], d[:])
	byteorder.BigEndian.PutUint16(ip[10:12], inetChecksum(ip))
	return append(ip, tcp...)
}

// inetChecksum is the Internet checksum (RFC 1071) of b.
func inetChecksum(b []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(b); i += 2 {
		sum += uint32(byteorder.BigEndian.Uint16(b[i:]))
	}
	if len(b)%2 == 1 {
		sum += uint32(b[len(b)-1]) << 8
	}
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}
