package e2e

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/calico-aio/calico-aio/store/api"
)

const (
	annotQoSIngressBW    = "qos.projectcalico.org/ingressBandwidth"
	annotQoSIngressBurst = "qos.projectcalico.org/ingressBurst"
	annotQoSEgressBW     = "qos.projectcalico.org/egressBandwidth"
	annotQoSEgressBurst  = "qos.projectcalico.org/egressBurst"
)

// A bandwidth annotation limits a TCP stream to the pod to within 10% of
// the rate (a tbf on its host veth), and one from the pod too (a tbf on
// its ifb device); a bad annotation fails ADD naming it and leaves nothing
// behind; changing the endpoint's qosControls (on Kubernetes: the pod's
// annotations, which it derives from) applies live, removing them lifts the
// limit, and deleting a shaped pod removes its ifb. On etcd and on the
// Kubernetes datastore.
func TestQoSBandwidthAnnotation(t *testing.T) {
	t.Parallel()
	forEachDatastore(t, map[datastore]int{onEtcd: 181, onKube: 192}, func(t *testing.T, k *kubeCNIEnv) {
		testQoSBandwidth(t, newQoSEnv(t, k, "10.181.0.0/24"))
	})
}

func testQoSBandwidth(t *testing.T, e *qosEnv) {
	const rate = 20e6 // bits/s
	e.createPod(t, "shop", "bad", "", nil, map[string]string{annotQoSIngressBW: "20 Mbit"})
	e.addFails(t, e.l, podRuntime(t, "shop", "bad"), "pod shop/bad", annotQoSIngressBW, "is not a quantity")

	e.startAgent("node1")
	// A 1 Mbit (125 kB) burst: Calico's default, 4 Gibit, would let the
	// whole measurement through at line rate.
	server := e.addPod(t, "server", map[string]string{annotQoSIngressBW: "20M", annotQoSIngressBurst: "1M"})
	client := e.addPod(t, "client", map[string]string{annotQoSEgressBW: "20M", annotQoSEgressBurst: "1M"})
	plain := e.addPod(t, "plain", nil)
	if got, want := e.endpointOf(server).Spec.QoSControls, (api.QoSControls{IngressBandwidth: 20_000_000, IngressBurst: 1_000_000}); got == nil || *got != want {
		t.Fatalf("endpoint of shop/server: qosControls %+v, want %+v", got, want)
	}
	e.waitQdisc(t, server, "rate 20Mbit burst 125000b")
	if got := e.rootQdisc(t, plain); strings.Contains(got, "tbf") {
		t.Errorf("the pod without QoS has root qdisc %q", got)
	}

	in := tcpRate(t, plain.ns, server.ns, hostPort(server.ip, 5201), time.Second, 3*time.Second)
	t.Logf("to shop/server (ingressBandwidth 20M): %.1f Mbit/s", in/1e6)
	if in < 0.9*rate || in > 1.1*rate {
		t.Errorf("to shop/server: %.1f Mbit/s, want 20 Mbit/s within 10%%", in/1e6)
	}
	out := tcpRate(t, client.ns, plain.ns, hostPort(plain.ip, 5202), time.Second, 3*time.Second)
	t.Logf("from shop/client (egressBandwidth 20M): %.1f Mbit/s", out/1e6)
	if out < 0.9*rate || out > 1.1*rate {
		t.Errorf("from shop/client: %.1f Mbit/s, want 20 Mbit/s within 10%%", out/1e6)
	}
	free := tcpRate(t, plain.ns, client.ns, hostPort(client.ip, 5203), time.Second, 2*time.Second)
	t.Logf("to shop/client (no ingress limit): %.1f Mbit/s", free/1e6)
	if free < 2*rate {
		t.Errorf("to shop/client, which has no ingress limit: %.1f Mbit/s, want well above 20", free/1e6)
	}

	// Live: 40 Mbit/s, then no limit at all.
	e.setPodQoS(server, map[string]any{annotQoSIngressBW: "40M", annotQoSIngressBurst: "1M"},
		&api.QoSControls{IngressBandwidth: 40_000_000, IngressBurst: 1_000_000})
	e.waitQdisc(t, server, "rate 40Mbit burst 125000b")
	in = tcpRate(t, plain.ns, server.ns, hostPort(server.ip, 5204), time.Second, 3*time.Second)
	t.Logf("to shop/server (ingressBandwidth 40M): %.1f Mbit/s", in/1e6)
	if in < 0.9*2*rate || in > 1.1*2*rate {
		t.Errorf("to shop/server after the change: %.1f Mbit/s, want 40 Mbit/s within 10%%", in/1e6)
	}
	e.setPodQoS(server, map[string]any{annotQoSIngressBW: nil, annotQoSIngressBurst: nil}, nil)
	e.waitQdisc(t, server, "")
	// Deleting the shaped pod removes its ifb.
	if err := e.del(e.l, client.rt); err != nil {
		t.Fatalf("DEL %s: %v", client.rt.ContainerID, err)
	}
	eventually(t, 20*time.Second, "the ifb of shop/client goes with it", func() error {
		if out, _ := inNS(e.host.ns, "ip", "-o", "link", "show", "type", "ifb"); strings.Contains(out, "bwcali") {
			return fmt.Errorf("ifb devices: %s", out)
		}
		return nil
	})

	for _, p := range []pod{server, plain} {
		if err := e.del(e.l, p.rt); err != nil {
			t.Errorf("DEL %s: %v", p.rt.ContainerID, err)
		}
	}
	e.assertClean()
}

// Packet rate annotations drop what exceeds the rate (limit match) in each
// direction, and max connections annotations refuse a connection over the
// limit with a reset, until one closes. On etcd and on the Kubernetes
// datastore.
func TestQoSPacketRateAndConnections(t *testing.T) {
	t.Parallel()
	forEachDatastore(t, map[datastore]int{onEtcd: 182, onKube: 193}, func(t *testing.T, k *kubeCNIEnv) {
		testQoSPacketRateAndConnections(t, newQoSEnv(t, k, "10.182.0.0/24"))
	})
}

func testQoSPacketRateAndConnections(t *testing.T, e *qosEnv) {
	e.startAgent("node1")
	slowIn := e.addPod(t, "slow-in", map[string]string{"qos.projectcalico.org/ingressPacketRate": "10"})
	slowOut := e.addPod(t, "slow-out", map[string]string{"qos.projectcalico.org/egressPacketRate": "10", "qos.projectcalico.org/egressPacketBurst": "20"})
	capped := e.addPod(t, "capped", map[string]string{"qos.projectcalico.org/ingressMaxConnections": "2"})
	single := e.addPod(t, "single", map[string]string{"qos.projectcalico.org/egressMaxConnections": "1"})
	plain := e.addPod(t, "plain", nil)
	if got := e.endpointOf(slowIn).Spec.QoSControls; got == nil || got.IngressPacketRate != 10 || got.IngressPacketBurst != 5 {
		t.Fatalf("endpoint of shop/slow-in: qosControls %+v, want packet rate 10 and Calico's default burst 5", got)
	}

	// 200 datagrams at once: the limited direction passes about its burst
	// (5, 20) plus 10 a second; the unlimited one all of them.
	sinkIn, sinkPlain := listenUDP(t, slowIn.ns, hostPort(slowIn.ip, 9000)), listenUDP(t, plain.ns, hostPort(plain.ip, 9000))
	eventually(t, 20*time.Second, "the agent programs shop/slow-in's rate limit", func() error {
		if n := burstUDP(t, plain, sinkIn, 200); n > 30 {
			return fmt.Errorf("%d of 200 datagrams reached shop/slow-in (ingressPacketRate 10)", n)
		}
		return nil
	})
	if n := burstUDP(t, plain, sinkIn, 200); n < 1 || n > 30 {
		t.Errorf("%d of 200 datagrams reached shop/slow-in (ingressPacketRate 10, burst 5), want 1..30", n)
	}
	if n := burstUDP(t, slowOut, sinkPlain, 200); n < 1 || n > 45 {
		t.Errorf("%d of 200 datagrams from shop/slow-out (egressPacketRate 10, burst 20) arrived, want 1..45", n)
	}
	// (Not to shop/capped: a UDP flow counts as one of its connections.)
	if n := burstUDP(t, plain, listenUDP(t, single.ns, hostPort(single.ip, 9000)), 200); n < 190 {
		t.Errorf("only %d of 200 datagrams reached shop/single, which has no packet rate limit", n)
	}

	// Connections to shop/capped (ingressMaxConnections 2): a third is
	// reset, and once one closes another may open.
	holdListener(t, capped.ns, hostPort(capped.ip, 8080))
	conns := e.expectConnLimit(t, plain, hostPort(capped.ip, 8080), 2, "to shop/capped (ingressMaxConnections 2)")
	conns[0].Close()
	eventually(t, 10*time.Second, "a connection to shop/capped after one closed", func() error {
		_, err := dialHold(t, plain.ns, hostPort(capped.ip, 8080))
		return err
	})
	// Connections from shop/single (egressMaxConnections 1).
	holdListener(t, plain.ns, hostPort(plain.ip, 8081))
	e.expectConnLimit(t, single, hostPort(plain.ip, 8081), 1, "from shop/single (egressMaxConnections 1)")

	for _, p := range []pod{slowIn, slowOut, capped, single, plain} {
		if err := e.del(e.l, p.rt); err != nil {
			t.Errorf("DEL %s: %v", p.rt.ContainerID, err)
		}
	}
	e.assertClean()
}

// expectConnLimit waits until the agent has programmed the limit, then
// expects from to open max connections to addr and the next one to be
// reset; it returns the open ones.
func (e *qosEnv) expectConnLimit(t *testing.T, from pod, addr string, max int, what string) []net.Conn {
	t.Helper()
	rule := fmt.Sprintf("--connlimit-above %d ", max)
	eventually(t, 20*time.Second, "the agent programs the connection limit "+what, func() error {
		if !strings.Contains(mustNS(t, e.host.ns, "iptables-save", "-t", "filter"), rule) {
			return fmt.Errorf("no rule with %s", rule)
		}
		return nil
	})
	var open []net.Conn
	for i := 0; i < max; i++ {
		c, err := dialHold(t, from.ns, addr)
		if err != nil {
			t.Fatalf("connection %d %s: %v", i+1, what, err)
		}
		open = append(open, c)
	}
	_, err := dialHold(t, from.ns, addr)
	switch {
	case err == nil:
		t.Fatalf("connection %d %s was accepted", max+1, what)
	case !refused(err):
		t.Fatalf("connection %d %s: %v, want connection refused (reset)", max+1, what, err)
	}
	return open
}
