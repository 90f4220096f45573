package e2e

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/calico-aio/calico-aio/store/api"
)

// kddPolicySample is one policy write and when its effect showed.
type kddPolicySample struct {
	kind     string // "kubernetes" (a Kubernetes NetworkPolicy) or "calico"
	enforced time.Duration
}

// kddPolicyNode is one side's pods: a client and servers listening on 80.
type kddPolicyNode struct {
	client *kpPod
	srv    []*kpPod
}

// kddPolicyPods adds the client and n servers on s (through its agent)
// and waits until the client reaches every server.
func kddPolicyPods(b *testing.B, s *kddBenchSide, n int) *kddPolicyNode {
	b.Helper()
	p := &kddPolicyNode{client: kpAddPod(b, s.e, s.l, "bench", "client", "", map[string]string{"role": "client"}, map[string]int{})}
	for i := range n {
		srv := kpAddPod(b, s.e, s.l, "bench", fmt.Sprintf("srv-%d", i), "", map[string]string{"role": "server", "srv": strconv.Itoa(i)},
			map[string]int{"http": 80})
		listenPeer(b, srv.net.ns, ":80")
		p.srv = append(p.srv, srv)
	}
	for _, srv := range p.srv {
		eventually(b, kpTimeout, s.name+": client -> "+srv.String(), tcpProbe(p.client.net.ns, hostPort(srv.net.ip, 80)))
	}
	return p
}

// kddAllowClient is the Calico NetworkPolicy that lets the client reach
// server i on TCP 80, ahead of the Kubernetes policies (order 10).
func kddAllowClient(i int) *api.NetworkPolicy {
	np := kindOf("NetworkPolicy").NewObject().(*api.NetworkPolicy)
	order := 10.0
	np.Metadata.Namespace, np.Metadata.Name = "bench", fmt.Sprintf("allow-client-%d", i)
	np.Spec.Order, np.Spec.Selector, np.Spec.Types = &order, fmt.Sprintf("srv == '%d'", i), []api.PolicyType{api.PolicyTypeIngress}
	np.Spec.Ingress = []api.Rule{{Action: api.ActionAllow, Protocol: protoTCP(),
		Source: api.EntityRule{Selector: "role == 'client'"}, Destination: api.EntityRule{Ports: []api.Port{api.SinglePort(80)}}}}
	return np
}

// BenchmarkKDDPolicy measures policy write -> enforced on the two
// datastores side by side, with real TCP between two pods of a node: for
// each of N servers, a Kubernetes NetworkPolicy denying it all ingress is
// created in the API (connects from the client stop getting through),
// then a Calico NetworkPolicy allowing the client is created through the
// datastore client (calicoctl's way; on Kubernetes a custom resource in
// the API; connects get through again). On etcd the agent's controller
// copies the Kubernetes policy into etcd first; on Kubernetes the agent
// reads it from the API. Samples of the two sides alternate. The clock
// stops when the first connect that shows the effect started.
// KDD_POLICY_BENCH_SERVERS sets N (default 20: 40 writes per side).
func BenchmarkKDDPolicy(b *testing.B) {
	n := kbEnvInt("KDD_POLICY_BENCH_SERVERS", 20)
	sides := kddBenchSides(b, 193, 194, true)
	nodes := map[string]*kddPolicyNode{}
	for _, s := range sides {
		nodes[s.name] = kddPolicyPods(b, s, n)
	}
	samples := map[string][]kddPolicySample{}
	measure := func(s *kddBenchSide, kind string, i int) {
		p := nodes[s.name]
		addr := hostPort(p.srv[i].net.ip, 80)
		kddIdle(b, sides)
		t0 := time.Now()
		deadline := t0.Add(2 * kpTimeout)
		var at time.Time
		var err error
		if kind == "kubernetes" {
			s.e.create(b, kpPolicyPath("bench"), kpPolicy(fmt.Sprintf("deny-%d", i), map[string]any{
				"podSelector": kpMatch("srv", strconv.Itoa(i)), "policyTypes": []string{"Ingress"}}))
			at, err = kbUntilDenied(p.client.net.ns, addr, deadline)
		} else {
			if _, err := s.e.cl.CreateResource(context.Background(), kddAllowClient(i)); err != nil {
				b.Fatalf("%s: creating allow-client-%d: %v", s.name, i, err)
			}
			at, err = kbUntilAllowed(p.client.net.ns, addr, deadline)
		}
		if err != nil {
			b.Fatalf("%s: %s policy for server %d: %v after %s", s.name, kind, i, err, time.Since(t0).Round(time.Millisecond))
		}
		samples[s.name] = append(samples[s.name], kddPolicySample{kind: kind, enforced: at.Sub(t0)})
	}
	interleaved(sides, n, func(i int, s *kddBenchSide) { measure(s, "kubernetes", i) })
	interleaved(sides, n, func(i int, s *kddBenchSide) { measure(s, "calico", i) })

	of := func(side, kind string) []time.Duration {
		var out []time.Duration
		for _, x := range samples[side] {
			if kind == "" || x.kind == kind {
				out = append(out, x.enforced)
			}
		}
		return out
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "policy write -> enforced (TCP client -> server), %d writes per side, interleaved (ms)\n%-11s %-38s %8s %8s %8s\n",
		2*n, "datastore", "policy", "p50", "p99", "max")
	for _, s := range sides {
		for _, k := range []struct{ kind, what string }{{"", "all"}, {"kubernetes", "Kubernetes NetworkPolicy (deny)"}, {"calico", "Calico NetworkPolicy (allow)"}} {
			d := of(s.name, k.kind)
			fmt.Fprintf(&sb, "%-11s %-38s %8.1f %8.1f %8.1f\n", s.name, k.what, millis(quantile(d, .5)), millis(quantile(d, .99)), millis(quantile(d, 1)))
		}
	}
	e, k := of("etcd", ""), of("kubernetes", "")
	fmt.Fprintf(&sb, "kubernetes/etcd: p50 %.2fx, p99 %.2fx", float64(quantile(k, .5))/float64(quantile(e, .5)), float64(quantile(k, .99))/float64(quantile(e, .99)))
	b.Log(sb.String())
	b.ReportMetric(millis(quantile(e, .5)), "etcd-enforce-p50-ms")
	b.ReportMetric(millis(quantile(e, .99)), "etcd-enforce-p99-ms")
	b.ReportMetric(millis(quantile(k, .5)), "kdd-enforce-p50-ms")
	b.ReportMetric(millis(quantile(k, .99)), "kdd-enforce-p99-ms")
	b.ReportMetric(millis(quantile(of("kubernetes", "kubernetes"), .99)), "kdd-knp-p99-ms")
	b.ReportMetric(millis(quantile(of("kubernetes", "calico"), .99)), "kdd-calico-p99-ms")
}
