package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/calico-aio/calico-aio/store"
	"github.com/calico-aio/calico-aio/store/api"
)

// Helpers for the policy traffic tests: probes that are expected to pass
// or fail, checked together until they all give the expected answer.

// policyTimeout bounds how long the agent may take to program a change.
const policyTimeout = 10 * time.Second

// probeTimeout is how long one connection attempt waits; a dropped packet
// costs this much, so probes run concurrently.
const probeTimeout = time.Second

// probe is one traffic check: run returns nil when the traffic got
// through; want says whether it should.
type probe struct {
	name string
	want bool
	run  func() error
}

func allow(name string, run func() error) probe { return probe{name: name, want: true, run: run} }
func deny(name string, run func() error) probe  { return probe{name: name, want: false, run: run} }

// expectTraffic waits until every probe gives its expected answer in the
// same round. The allowed probes of a round show that the path works and
// the change is programmed, so the denied ones fail because of policy.
func expectTraffic(t testing.TB, what string, probes ...probe) {
	t.Helper()
	eventually(t, policyTimeout, what, func() error {
		errs := make([]error, len(probes))
		var wg sync.WaitGroup
		for i, p := range probes {
			wg.Go(func() {
				err := p.run()
				switch {
				case p.want && err != nil:
					errs[i] = fmt.Errorf("%s: want allowed: %w", p.name, err)
				case !p.want && err == nil:
					errs[i] = fmt.Errorf("%s: want denied, got through", p.name)
				}
			})
		}
		wg.Wait()
		return errors.Join(errs...)
	})
}

func tcpProbe(from ns.NetNS, addr string) func() error {
	return func() error { _, err := dialPeer(from, addr); return err }
}

// hostPort joins an address (v4 or v6) and a port.
func hostPort(ip string, port int) string { return net.JoinHostPort(ip, fmt.Sprint(port)) }

// listenPeer opens a TCP listener in n that answers every connection with
// the client's address as it sees it, then a newline.
func listenPeer(t testing.TB, n ns.NetNS, addr string) {
	t.Helper()
	serveTCP(t, n, addr, func(c net.Conn) {
		host, _, _ := net.SplitHostPort(c.RemoteAddr().String())
		_, _ = c.Write([]byte(host + "\n"))
		c.Close()
	})
}

// dialPeer connects from n to a listenPeer listener and returns the
// address the listener saw.
func dialPeer(n ns.NetNS, addr string) (string, error) {
	var got string
	err := n.Do(func(ns.NetNS) error {
		c, err := net.DialTimeout("tcp", addr, probeTimeout)
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetReadDeadline(time.Now().Add(probeTimeout))
		buf := make([]byte, 64)
		k, err := c.Read(buf)
		if err != nil {
			return err
		}
		got = strings.TrimSpace(string(buf[:k]))
		return nil
	})
	return got, err
}

// udpSink records the source address of every datagram it receives.
type udpSink struct {
	mu   sync.Mutex
	from map[string]int
	addr string
}

func listenUDP(t testing.TB, n ns.NetNS, addr string) *udpSink {
	t.Helper()
	var c net.PacketConn
	mustDo(t, n, func() error {
		var err error
		c, err = net.ListenPacket("udp", addr)
		return err
	})
	t.Cleanup(func() { c.Close() })
	s := &udpSink{from: map[string]int{}, addr: c.LocalAddr().String()}
	go func() {
		buf := make([]byte, 1500)
		for {
			_, src, err := c.ReadFrom(buf)
			if err != nil {
				return
			}
			host, _, _ := net.SplitHostPort(src.String())
			s.mu.Lock()
			s.from[host]++
			s.mu.Unlock()
		}
	}()
	return s
}

func (s *udpSink) count(src string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.from[src]
}

// udpProbe sends datagrams from src (an address in n) to the sink and
// reports whether one arrived.
func udpProbe(n ns.NetNS, src string, sink *udpSink) func() error {
	return func() error {
		before := sink.count(src)
		err := n.Do(func(ns.NetNS) error {
			dst, err := net.ResolveUDPAddr("udp", sink.addr)
			if err != nil {
				return err
			}
			c, err := net.DialUDP("udp", &net.UDPAddr{IP: net.ParseIP(src)}, dst)
			if err != nil {
				return err
			}
			defer c.Close()
			for i := 0; i < 3; i++ {
				if _, err := c.Write([]byte("probe")); err != nil {
					return err
				}
				time.Sleep(50 * time.Millisecond)
			}
			return nil
		})
		if err != nil {
			return err
		}
		deadline := time.Now().Add(probeTimeout)
		for time.Now().Before(deadline) {
			if sink.count(src) > before {
				return nil
			}
			time.Sleep(20 * time.Millisecond)
		}
		return fmt.Errorf("no datagram from %s arrived at %s", src, sink.addr)
	}
}

// endpointOf finds the WorkloadEndpoint the CNI plugin wrote for p.
func (e *cniEnv) endpointOf(p pod) *api.WorkloadEndpoint {
	e.t.Helper()
	weps, _, err := e.cl.ListResources(context.Background(), wepKindInfo(), "")
	if err != nil {
		e.t.Fatal(err)
	}
	for _, r := range weps {
		if w := r.(*api.WorkloadEndpoint); w.Spec.ContainerID == p.rt.ContainerID {
			return w
		}
	}
	e.t.Fatalf("no endpoint for container %s", p.rt.ContainerID)
	return nil
}

// editEndpoint changes p's WorkloadEndpoint in the datastore, as an
// orchestrator would (labels, floating IPs, spoofing exceptions).
func (e *cniEnv) editEndpoint(p pod, edit func(*api.WorkloadEndpoint)) {
	e.t.Helper()
	for i := 0; ; i++ {
		w := e.endpointOf(p)
		edit(w)
		_, err := e.cl.UpdateResource(context.Background(), w)
		if err == nil {
			return
		}
		var conflict *store.ConflictError
		if !errors.As(err, &conflict) || i == 5 {
			e.t.Fatalf("updating endpoint of %s: %v", p.rt.ContainerID, err)
		}
	}
}

// label sets p's own labels (the reserved projectcalico.org ones are kept).
func (e *cniEnv) label(p pod, labels map[string]string) {
	e.t.Helper()
	e.editEndpoint(p, func(w *api.WorkloadEndpoint) {
		keep := map[string]string{}
		for k, v := range w.Metadata.Labels {
			if strings.HasPrefix(k, "projectcalico.org/") {
				keep[k] = v
			}
		}
		for k, v := range labels {
			keep[k] = v
		}
		w.Metadata.Labels = keep
	})
}

// k8sPod creates a pod the way the kubelet would: CNI_ARGS name its
// namespace and pod, so the plugin writes a k8s endpoint with profile
// kns.<namespace>.
func (e *cniEnv) k8sPod(l *libcni.NetworkConfigList, namespace, name string) pod {
	e.t.Helper()
	return e.newPod(l, namespace+"-"+name, [2]string{"IgnoreUnknown", "1"},
		[2]string{"K8S_POD_NAMESPACE", namespace}, [2]string{"K8S_POD_NAME", name})
}

// policyEnv is a host with a datastore, pools, a network and calico-node.
func policyEnv(t *testing.T, index int, v4pool, v6pool string) (*cniEnv, *libcni.NetworkConfigList) {
	e := newCNIEnv(t, index)
	e.pool("v4", v4pool)
	extra := ""
	if v6pool != "" {
		e.pool("v6", v6pool)
		extra = `,"assign_ipv6":"true"`
	}
	l := e.conflist("1.0.0", "net1", e.calicoPlugin("node1", extra))
	e.startAgent("node1")
	return e, l
}

func kindOf(kind string) api.KindInfo { k, _ := api.LookupKind(kind); return k }

// getAs reads one object of a kind.
func getAs[T api.Resource](e *cniEnv, kind, namespace, name string) T {
	e.t.Helper()
	r, err := e.cl.GetResource(context.Background(), kindOf(kind), namespace, name)
	if err != nil {
		e.t.Fatal(err)
	}
	return r.(T)
}

func protoTCP() *api.Protocol { p := api.ProtocolFromString("TCP"); return &p }

func apiPorts(ps ...uint16) []api.Port {
	out := make([]api.Port, len(ps))
	for i, p := range ps {
		out[i] = api.SinglePort(p)
	}
	return out
}
