package e2e

import (
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/plugins/pkg/ns"
)

// qosEnv is a node with a kube-apiserver for pod annotations, an open
// policy and calico-node running, on either datastore.
type qosEnv struct {
	*kubeCNIEnv
	l *libcni.NetworkConfigList
}

func newQoSEnv(t *testing.T, k *kubeCNIEnv, pool string) *qosEnv {
	e := &qosEnv{kubeCNIEnv: k}
	e.pool("default-v4", pool)
	e.l = e.conflist(e.kubeconfig, "", `{"type":"calico-ipam","ipv4_pools":["default-v4"]}`)
	e.create(t, "/api/v1/namespaces", map[string]any{"apiVersion": "v1", "kind": "Namespace",
		"metadata": map[string]any{"name": "shop"}})
	return e
}

// addPod creates pod shop/name with the annotations and adds it.
func (e *qosEnv) addPod(t *testing.T, name string, annotations map[string]string) pod {
	t.Helper()
	e.createPod(t, "shop", name, "", nil, annotations)
	n := newNS(t)
	rt := podRuntimeIn(n, "shop", name)
	return pod{ns: n, ip: e.addOK(t, e.l, rt), rt: rt}
}

// rootQdisc is the root qdisc line of the pod's host veth.
func (e *qosEnv) rootQdisc(t *testing.T, p pod) string {
	t.Helper()
	out := mustNS(t, e.host.ns, "tc", "qdisc", "show", "dev", e.endpointOf(p).Spec.InterfaceName)
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, " root ") {
			return l
		}
	}
	return ""
}

// waitQdisc waits until the pod's root qdisc says want ("" : no tbf).
func (e *qosEnv) waitQdisc(t *testing.T, p pod, want string) {
	t.Helper()
	eventually(t, 20*time.Second, "tbf on the host veth of "+p.rt.ContainerID+": "+want, func() error {
		got := e.rootQdisc(t, p)
		if want == "" && strings.Contains(got, "tbf") || want != "" && !strings.Contains(got, want) {
			return fmt.Errorf("root qdisc %q", got)
		}
		return nil
	})
}

// wirePerPayload turns the payload a receiver counts into the frames a
// tbf counts: at MTU 1500 a segment of 1448 payload bytes (TCP timestamps
// on) is a 1514-byte frame.
const wirePerPayload = 1514.0 / 1448.0

// tcpRate streams TCP from one namespace to a listener at addr in
// another, as fast as the sender can write, and returns the bits per
// second on the wire (wirePerPayload) over window, counted after warm
// (slow start and any initial burst done).
func tcpRate(t *testing.T, from, to ns.NetNS, addr string, warm, window time.Duration) float64 {
	t.Helper()
	l := listenTCP(t, to, addr)
	var got atomic.Int64
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		// A small fixed receive buffer: what the shaper let through waits
		// in it at most 128 KiB, so a reader delayed on a busy machine
		// cannot read a backlog inside the window that arrived before it
		// (at 20 Mbit/s over 2 s, under 3 % of the bytes counted).
		_ = c.(*net.TCPConn).SetReadBuffer(128 << 10)
		buf := make([]byte, 64<<10)
		for {
			n, err := c.Read(buf)
			got.Add(int64(n))
			if err != nil {
				return
			}
		}
	}()
	var c net.Conn
	mustDo(t, from, func() (err error) { c, err = net.DialTimeout("tcp", addr, 5*time.Second); return err })
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 64<<10)
		for {
			if _, err := c.Write(buf); err != nil {
				return
			}
		}
	}()
	time.Sleep(warm)
	start, before := time.Now(), got.Load()
	time.Sleep(window)
	bits := float64(got.Load()-before) * 8 * wirePerPayload / time.Since(start).Seconds()
	c.Close()
	l.Close()
	<-done
	return bits
}

// burstUDP sends n datagrams from p to addr at once and returns how many
// arrived at the sink within a second after.
func burstUDP(t *testing.T, p pod, sink *udpSink, n int) int {
	t.Helper()
	before := sink.count(p.ip)
	mustDo(t, p.ns, func() error {
		c, err := net.Dial("udp", sink.addr)
		if err != nil {
			return err
		}
		defer c.Close()
		for i := 0; i < n; i++ {
			if _, err := c.Write([]byte("qos")); err != nil {
				return err
			}
		}
		return nil
	})
	time.Sleep(time.Second)
	return sink.count(p.ip) - before
}

// holdListener accepts TCP connections at addr in n and keeps them open.
func holdListener(t *testing.T, n ns.NetNS, addr string) {
	t.Helper()
	serveTCP(t, n, addr, func(c net.Conn) { _, _ = io.Copy(io.Discard, c); c.Close() })
}

// serveTCP listens at addr in n and runs handle on each connection in a
// goroutine of its own, until the test ends.
func serveTCP(t testing.TB, n ns.NetNS, addr string, handle func(net.Conn)) {
	t.Helper()
	l := listenTCP(t, n, addr)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go handle(c)
		}
	}()
}

// dialHold opens a TCP connection from n to addr and leaves it open
// until the test ends; it returns the connection or the dial error.
func dialHold(t *testing.T, n ns.NetNS, addr string) (net.Conn, error) {
	t.Helper()
	var c net.Conn
	err := n.Do(func(ns.NetNS) (err error) { c, err = net.DialTimeout("tcp", addr, 2*time.Second); return err })
	if err == nil {
		t.Cleanup(func() { c.Close() })
	}
	return c, err
}

// refused reports whether a dial error is a TCP reset (connection refused).
func refused(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && strings.Contains(err.Error(), "connection refused")
}
