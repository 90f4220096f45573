package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/calico-aio/calico-aio/k8s"
)

func kbEnvInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// BenchmarkCNIK8s compares CNI ADD and DEL of Kubernetes pods with and
// without the API: the same plugin and netconf except that one has
// policy.type k8s and a kubeconfig (ADD reads the pod, its namespace and
// its service account from a real kube-apiserver), the other the same
// K8S_POD_* arguments and no way to the API. Both through libcni, a fresh
// network namespace per pod, ADDs of the two alternating.
func BenchmarkCNIK8s(b *testing.B) {
	pods := kbEnvInt("CNI_K8S_BENCH_PODS", 100)
	e := newKubeCNIEnv(b, 61)
	createPool(b, e.cl, "bench", "10.161.0.0/16", 26)
	createNode(b, e.cl, "node1")
	kpNamespace(b, e, "bench", map[string]string{"team": "bench"})
	e.create(b, "/api/v1/namespaces/bench/serviceaccounts", map[string]any{"apiVersion": "v1", "kind": "ServiceAccount",
		"metadata": map[string]any{"name": "runner", "labels": map[string]string{"role": "bench"}}})
	kube := e.conflist(e.kubeconfig, "", `{"type":"calico-ipam"}`)
	noAPI := e.cniEnv.conflist("1.0.0", "k8s-pod-network", e.calicoPlugin("node1", ""))

	// The API's pods (the no-API path needs none).
	podIn := func(name string) {
		e.createPodWith(b, "bench", name, "runner", map[string]string{"app": "bench"}, nil,
			[]map[string]any{{"name": "http", "containerPort": 80}})
	}
	rtFor := func(name string) *libcni.RuntimeConf { return podRuntime(b, "bench", name) }
	for i := range pods {
		podIn(fmt.Sprintf("k%04d", i))
	}
	podIn("warm-k")
	// Warm both (page cache, first block claim) before measuring.
	for _, w := range []struct {
		l    *libcni.NetworkConfigList
		name string
	}{{kube, "warm-k"}, {noAPI, "warm-n"}} {
		rt := rtFor(w.name)
		if _, err := e.add(w.l, rt); err != nil {
			b.Fatalf("warm-up ADD %s: %v", w.name, err)
		}
		if err := e.del(w.l, rt); err != nil {
			b.Fatalf("warm-up DEL %s: %v", w.name, err)
		}
	}

	runs := []*cniRun{{name: "k8s API", desc: "policy.type k8s + kubeconfig"}, {name: "no API", desc: "K8S_POD_* args only"}}
	confs := []*libcni.NetworkConfigList{kube, noAPI}
	prefix := []string{"k", "n"}
	rts := [2][]*libcni.RuntimeConf{}
	var cpu [2]time.Duration
	for i := range pods {
		for j, r := range runs {
			rt := rtFor(fmt.Sprintf("%s%04d", prefix[j], i))
			c0 := childCPU()
			t0 := time.Now()
			res, err := e.add(confs[j], rt)
			r.add = append(r.add, time.Since(t0))
			cpu[j] += childCPU() - c0
			if err != nil {
				b.Fatalf("%s ADD %s: %v", r.name, rt.ContainerID, err)
			}
			if v4, _ := podAddrs(res); v4 == "" {
				b.Fatalf("%s ADD %s: no address", r.name, rt.ContainerID)
			}
			rts[j] = append(rts[j], rt)
		}
	}
	for i := range pods {
		for j, r := range runs {
			t0 := time.Now()
			if err := e.del(confs[j], rts[j][i]); err != nil {
				b.Fatalf("%s DEL %s: %v", r.name, rts[j][i].ContainerID, err)
			}
			r.del = append(r.del, time.Since(t0))
		}
	}
	for j, r := range runs {
		r.pods, r.cpuPerAdd = pods, cpu[j]/time.Duration(pods)
	}
	// Both kinds of endpoint were written: the API's labels on one only.
	e.assertClean()

	k, n := runs[0], runs[1]
	b.Logf("\n%d pods each, through libcni, fresh netns per pod\n%-10s %-30s %9s %9s %9s %9s %9s", pods,
		"path", "netconf", "ADD p50", "ADD p99", "DEL p50", "DEL p99", "CPU/ADD")
	for _, r := range runs {
		b.Logf("%-10s %-30s %7.1fms %7.1fms %7.1fms %7.1fms %7.1fms", r.name, r.desc, millis(r.p(r.add, .5)), millis(r.p(r.add, .99)),
			millis(r.p(r.del, .5)), millis(r.p(r.del, .99)), millis(r.cpuPerAdd))
	}
	b.ReportMetric(millis(k.p(k.add, .5)), "k8s-add-p50-ms")
	b.ReportMetric(millis(k.p(k.add, .99)), "k8s-add-p99-ms")
	b.ReportMetric(millis(k.p(k.del, .5)), "k8s-del-p50-ms")
	b.ReportMetric(millis(k.cpuPerAdd), "k8s-cpu/add-ms")
	b.ReportMetric(millis(n.p(n.add, .5)), "noapi-add-p50-ms")
	b.ReportMetric(millis(n.p(n.add, .99)), "noapi-add-p99-ms")
	b.ReportMetric(millis(n.p(n.del, .5)), "noapi-del-p50-ms")
	b.ReportMetric(millis(n.cpuPerAdd), "noapi-cpu/add-ms")
	b.ReportMetric(millis(k.p(k.add, .5)-n.p(n.add, .5)), "api-add-p50-cost-ms")
}

// kbDial is one TCP connect from n with a timeout.
func kbDial(n ns.NetNS, addr string, timeout time.Duration) error {
	return n.Do(func(ns.NetNS) error {
		c, err := net.DialTimeout("tcp", addr, timeout)
		if err == nil {
			c.Close()
		}
		return err
	})
}

// kbDialTimeout is how long a connect may take before the path counts as
// denied (connects between pods of one node take well under 1 ms).
const kbDialTimeout = 200 * time.Millisecond

// kbUntilDenied connects from n to addr, one connect after the other, until
// two in a row fail, and returns when the first of them started.
func kbUntilDenied(n ns.NetNS, addr string, deadline time.Time) (time.Time, error) {
	for time.Now().Before(deadline) {
		start := time.Now()
		if kbDial(n, addr, kbDialTimeout) == nil {
			time.Sleep(2 * time.Millisecond)
			continue
		}
		if kbDial(n, addr, kbDialTimeout) != nil {
			return start, nil
		}
	}
	return time.Time{}, fmt.Errorf("%s still reachable", addr)
}

// kbUntilAllowed starts a connect from n to addr every 10 ms (a dropped SYN
// is only retried after a second, so each attempt is a new connection) and
// returns when the first one that got through started.
func kbUntilAllowed(n ns.NetNS, addr string, deadline time.Time) (time.Time, error) {
	ok := make(chan time.Time, 1)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	var wg sync.WaitGroup
	defer wg.Wait() // no connect outlives the call
	for time.Now().Before(deadline) {
		start := time.Now()
		wg.Go(func() {
			if kbDial(n, addr, kbDialTimeout) == nil {
				select {
				case ok <- start:
				default:
				}
			}
		})
		select {
		case t := <-ok:
			return t, nil
		case <-tick.C:
		}
	}
	return time.Time{}, fmt.Errorf("%s still unreachable", addr)
}

// BenchmarkK8sPolicyEnforcement measures how long a Kubernetes
// NetworkPolicy takes from its create in the API to its effect on traffic
// between two pods of the node, with calico-node running the policy
// controller (API -> knp.default.* in the datastore) and enforcing (datastore
// -> iptables). Each of N server pods gets a deny-all-ingress policy (a
// connect from the client pod stops getting through), then a policy that
// allows the client (it gets through again): 2N creates.
func BenchmarkK8sPolicyEnforcement(b *testing.B) {
	servers := kbEnvInt("K8S_POLICY_BENCH_SERVERS", 10)
	e := newKubeCNIEnv(b, 61)
	e.pool("bench", "10.161.0.0/16")
	l := e.conflist(e.kubeconfig, "", `{"type":"calico-ipam"}`)
	kpNamespace(b, e, "bench", map[string]string{"team": "bench"})
	client := kpAddPod(b, e, l, "bench", "client", "", map[string]string{"role": "client"}, map[string]int{})
	var srv []*kpPod
	for i := range servers {
		p := kpAddPod(b, e, l, "bench", fmt.Sprintf("srv-%d", i), "", map[string]string{"role": "server", "srv": strconv.Itoa(i)},
			map[string]int{"http": 80})
		listenPeer(b, p.net.ns, ":80")
		srv = append(srv, p)
	}
	e.startAgent("node1", "--kube-controllers-kubeconfig", e.kubeconfig)
	for _, p := range srv {
		eventually(b, kpTimeout, "client -> "+p.String(), tcpProbe(client.net.ns, hostPort(p.net.ip, 80)))
	}

	type sample struct{ enforced, stored time.Duration }
	var deny, allow []sample
	measure := func(name string, obj map[string]any, to *kpPod, allowed bool) sample {
		b.Helper()
		addr := hostPort(to.net.ip, 80)
		stored := make(chan time.Duration, 1)
		t0 := time.Now()
		e.create(b, kpPolicyPath("bench"), obj)
		deadline := t0.Add(2 * kpTimeout)
		go func() {
			for time.Now().Before(deadline) {
				if _, err := e.cl.GetResource(context.Background(), kindOf("NetworkPolicy"), "bench", k8s.NetworkPolicyPrefix+name); err == nil {
					stored <- time.Since(t0)
					return
				}
				time.Sleep(2 * time.Millisecond)
			}
			stored <- -1
		}()
		var at time.Time
		var err error
		if allowed {
			at, err = kbUntilAllowed(client.net.ns, addr, deadline)
		} else {
			at, err = kbUntilDenied(client.net.ns, addr, deadline)
		}
		if err != nil {
			b.Fatalf("policy %s: %v after %s", name, err, time.Since(t0).Round(time.Millisecond))
		}
		s := sample{enforced: at.Sub(t0), stored: <-stored}
		if s.stored < 0 {
			b.Fatalf("policy %s: knp.default.%s never in the datastore", name, name)
		}
		return s
	}
	for i, p := range srv {
		deny = append(deny, measure(fmt.Sprintf("deny-%d", i), kpPolicy(fmt.Sprintf("deny-%d", i), map[string]any{
			"podSelector": kpMatch("srv", strconv.Itoa(i)), "policyTypes": []string{"Ingress"}}), p, false))
		allow = append(allow, measure(fmt.Sprintf("allow-%d", i), kpPolicy(fmt.Sprintf("allow-%d", i), map[string]any{
			"podSelector": kpMatch("srv", strconv.Itoa(i)), "ingress": []any{map[string]any{
				"from":  []any{map[string]any{"podSelector": kpMatch("role", "client")}},
				"ports": []any{map[string]any{"port": 80}}}}}), p, true))
	}

	pick := func(ss []sample, f func(sample) time.Duration) []time.Duration {
		out := make([]time.Duration, len(ss))
		for i, s := range ss {
			out[i] = f(s)
		}
		return out
	}
	enforced := func(s sample) time.Duration { return s.enforced }
	stored := func(s sample) time.Duration { return s.stored }
	agent := func(s sample) time.Duration { return s.enforced - s.stored }
	all := append(slices.Clone(deny), allow...)
	rows := []struct {
		what string
		d    []time.Duration
	}{
		{"API create -> traffic enforced (all)", pick(all, enforced)},
		{"  deny-all: connects stop", pick(deny, enforced)},
		{"  allow client: connects resume", pick(allow, enforced)},
		{"API create -> knp.default.* in datastore", pick(all, stored)},
		{"datastore -> traffic (agent)", pick(all, agent)},
	}
	b.Logf("\n%d NetworkPolicy creates (%d deny-all, %d allow), client pod -> server pod TCP 80\n%-42s %9s %9s %9s",
		len(all), len(deny), len(allow), "", "p50", "p99", "max")
	for _, r := range rows {
		b.Logf("%-42s %7.1fms %7.1fms %7.1fms", r.what, millis(quantile(r.d, .5)), millis(quantile(r.d, .99)), millis(quantile(r.d, 1)))
	}
	b.ReportMetric(millis(quantile(rows[0].d, .5)), "enforce-p50-ms")
	b.ReportMetric(millis(quantile(rows[0].d, .99)), "enforce-p99-ms")
	b.ReportMetric(millis(quantile(rows[1].d, .5)), "deny-p50-ms")
	b.ReportMetric(millis(quantile(rows[2].d, .5)), "allow-p50-ms")
	b.ReportMetric(millis(quantile(rows[3].d, .5)), "controller-p50-ms")
	b.ReportMetric(millis(quantile(rows[4].d, .5)), "agent-p50-ms")
}
