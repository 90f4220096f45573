package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/calico-aio/calico-aio/e2e/kubeapi"
)

// The benchmarks of the Kubernetes datastore, each side by side with
// etcd in one run: every sample of one backend is followed by one of the
// other (the order alternating), so both see the same machine (this
// shared VM's speed drifts within minutes). Each side is a node of its
// own: a kube-apiserver (pods, namespaces, and on Kubernetes Calico's
// custom resources), calico-node, and the CNI plugin driven by libcni.

// kddBenchSide is one backend's node.
type kddBenchSide struct {
	name  string
	e     *kubeCNIEnv
	agent *agentProc
	l     *libcni.NetworkConfigList
	audit *auditLog // the apiserver's requests
}

// auditedAPI is the apiserver option that logs every request once, when
// it completes, and the log to read them from.
func auditedAPI(tb testing.TB) (kubeapi.Option, *auditLog) {
	tb.Helper()
	dir := tb.TempDir()
	policy, path := filepath.Join(dir, "audit-policy.yaml"), filepath.Join(dir, "audit.log")
	if err := os.WriteFile(policy, []byte(callsAuditPolicy), 0o600); err != nil {
		tb.Fatal(err)
	}
	return kubeapi.WithArgs("--audit-policy-file="+policy, "--audit-log-path="+path), &auditLog{path: path}
}

// kddBenchSides starts the two nodes: etcd (host index etcdIndex; the
// plugin reads pods from the API and keeps Calico's data in an etcd of
// the test's) and Kubernetes (kubeIndex; no etcd of ours); both
// apiservers audited. Both have a pool (one /16 each: 10.<index>.0.0/16) and
// namespace "bench"; with controllers, each agent runs the controller
// too (on etcd it copies Kubernetes NetworkPolicies into Calico's).
func kddBenchSides(b *testing.B, etcdIndex, kubeIndex int, controllers bool) []*kddBenchSide {
	b.Helper()
	// Both apiservers audit every request (the audit log is written as
	// each request ends, which costs each of them alike).
	etcdOpt, etcdAudit := auditedAPI(b)
	kubeOpt, kubeAudit := auditedAPI(b)
	etcd := &kddBenchSide{name: "etcd", e: newKubeCNIEnvOn(b, etcdIndex, onEtcd, etcdOpt), audit: etcdAudit}
	kube := &kddBenchSide{name: "kubernetes", e: newKubeCNIEnvOn(b, kubeIndex, onKube, kubeOpt), audit: kubeAudit}
	kube.e.kddNode(b, "node1")
	sides := []*kddBenchSide{etcd, kube}
	for i, s := range sides {
		e := s.e
		createPool(b, e.cl, "bench", fmt.Sprintf("10.%d.0.0/16", []int{etcdIndex, kubeIndex}[i]), 26)
		kpNamespace(b, e, "bench", map[string]string{"team": "bench"})
		e.create(b, "/api/v1/namespaces/bench/serviceaccounts", map[string]any{"apiVersion": "v1", "kind": "ServiceAccount",
			"metadata": map[string]any{"name": "runner", "labels": map[string]string{"role": "bench"}}})
		s.l = e.conflist(e.kubeconfig, "", `{"type":"calico-ipam"}`)
	}
	// The product's resync period (the harness's is shorter).
	args := func(s *kddBenchSide) []string {
		if controllers {
			return []string{"--resync-interval", "30s", "--kube-controllers-kubeconfig", s.e.kubeconfig}
		}
		return []string{"--resync-interval", "30s"}
	}
	etcd.agent = etcd.e.startAgent("node1", args(etcd)...)
	kube.agent = kube.e.startKDDAgent(b, kube.e.host.ns, "node1", kube.e.kubeconfig, kube.e.state, args(kube)...)
	return sides
}

// kddIdle waits until every running agent of sides is idle
// (agentProc.settle): no dataplane work of an earlier call competes.
func kddIdle(b *testing.B, sides []*kddBenchSide) {
	for _, s := range sides {
		if s.agent.cmd.ProcessState == nil {
			s.agent.settle(b)
		}
	}
}

// interleaved runs f for every side, for i in [0, n), the sides' order
// alternating with i.
func interleaved(sides []*kddBenchSide, n int, f func(i int, s *kddBenchSide)) {
	for i := range n {
		order := slices.Clone(sides)
		if i%2 == 1 {
			slices.Reverse(order)
		}
		for _, s := range order {
			f(i, s)
		}
	}
}

// kddCNIRun is one side's figures in one phase.
type kddCNIRun struct {
	add, del kddCalls
	client   time.Duration // the plugin processes' CPU for the ADDs, summed
}

// kddCalls are the figures of one verb's calls.
type kddCalls struct {
	times []time.Duration
	reqs  []int     // the apiserver's requests per call (Kubernetes)
	last  []apiCall // the last call's requests
}

// requestsOf is the number of requests among calls (watches, long
// running and logged when they end, left out).
func requestsOf(calls []apiCall) int {
	n := 0
	for _, c := range calls {
		if c.Verb != "watch" {
			n++
		}
	}
	return n
}

// kddCNIPhase ADDs pods (named prefix0000...) on every side, interleaved,
// then DELs them, each call on idle agents (both sides').
func kddCNIPhase(b *testing.B, sides []*kddBenchSide, prefix string, pods int) map[string]*kddCNIRun {
	runs := map[string]*kddCNIRun{}
	rts := map[string][]*libcni.RuntimeConf{}
	for _, s := range sides {
		runs[s.name] = &kddCNIRun{}
		for i := range pods {
			name := fmt.Sprintf("%s%04d", prefix, i)
			s.e.createPodWith(b, "bench", name, "runner", map[string]string{"app": "bench"}, nil,
				[]map[string]any{{"name": "http", "containerPort": 80}})
			rts[s.name] = append(rts[s.name], podRuntime(b, "bench", name))
		}
	}
	call := func(s *kddBenchSide, rt *libcni.RuntimeConf, add bool) (time.Duration, []apiCall) {
		kddIdle(b, sides)
		if s.audit != nil {
			s.audit.take(b)
		}
		c0, t0 := childCPU(), time.Now()
		var err error
		if add {
			var res *current.Result
			if res, err = s.e.add(s.l, rt); err == nil {
				if v4, _ := podAddrs(res); v4 == "" {
					err = fmt.Errorf("no address")
				}
			}
		} else {
			err = s.e.del(s.l, rt)
		}
		d := time.Since(t0)
		if err != nil {
			b.Fatalf("%s: %s of %s: %v", s.name, map[bool]string{true: "ADD", false: "DEL"}[add], rt.ContainerID, err)
		}
		if add {
			runs[s.name].client += childCPU() - c0
		}
		if s.audit == nil {
			return d, nil
		}
		return d, s.audit.take(b)
	}
	for _, add := range []bool{true, false} {
		interleaved(sides, pods, func(i int, s *kddBenchSide) {
			d, calls := call(s, rts[s.name][i], add)
			c := &runs[s.name].del
			if add {
				c = &runs[s.name].add
			}
			c.times = append(c.times, d)
			if s.audit != nil {
				c.reqs, c.last = append(c.reqs, requestsOf(calls)), calls
			}
		})
	}
	return runs
}

// keepAudit copies the sides' audit logs (each request's timings) into
// the directory KDD_BENCH_KEEP_AUDIT names, if set.
func keepAudit(sides []*kddBenchSide) {
	if d := os.Getenv("KDD_BENCH_KEEP_AUDIT"); d != "" {
		for _, s := range sides {
			raw, _ := os.ReadFile(s.audit.path)
			_ = os.WriteFile(filepath.Join(d, s.name+".audit.log"), raw, 0o600)
		}
	}
}

// medianInt is the median (nearest rank below) of xs.
func medianInt(xs []int) int {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[(len(s)-1)/2]
}

// BenchmarkKDDCNI compares CNI ADD and DEL of Kubernetes pods on the two
// datastores, in one run: on each side a kube-apiserver holds the pods
// (policy.type k8s, a kubeconfig) and calico-node runs; the etcd side
// keeps Calico's data in an etcd, the Kubernetes side in the apiserver's
// custom resources. Phase 1: the agents serve the plugin's calls (the
// fast path); phase 2: the agents stopped, the plugin runs in-process.
// ADDs and DELs of the two sides alternate pod by pod, every call on an
// idle agent; the Kubernetes apiserver's requests per call are counted
// from its audit log and compared with what real Calico's plugin made
// (testdata/kdd/api-calls.json). KDD_BENCH_PODS sets the pods per side
// and phase (default 100).
func BenchmarkKDDCNI(b *testing.B) {
	pods := kbEnvInt("KDD_BENCH_PODS", 100)
	sides := kddBenchSides(b, 191, 192, false)
	for _, s := range sides { // page cache, the first block claim
		kddCNIPhase(b, []*kddBenchSide{s}, "warm-", 1)
	}
	agent := kddCNIPhase(b, sides, "a", pods)
	keepAudit(sides)
	for _, s := range sides {
		if n := s.agent.servedCalls(); n < 2*pods {
			b.Fatalf("%s: the agent served %d calls, want at least the %d ADDs and DELs", s.name, n, 2*pods)
		}
		s.agent.stop()
	}
	inproc := kddCNIPhase(b, sides, "p", pods)
	for _, s := range sides {
		s.e.t = b
		s.e.assertClean()
	}

	calicoADD := len(recordedCalls(b, "Calico CNI ADD shop/web-2"))
	calicoDEL := len(recordedCalls(b, "Calico CNI DEL shop/web-2"))
	var sb strings.Builder
	fmt.Fprintf(&sb, "%d pods per side and phase, interleaved (ms)\n%-12s %-11s %8s %8s %8s %8s %8s %9s %9s\n", pods,
		"path", "datastore", "ADD p50", "ADD p99", "DEL p50", "DEL p99", "client", "API/ADD", "API/DEL")
	for _, ph := range []struct {
		name string
		runs map[string]*kddCNIRun
	}{{"agent", agent}, {"in-process", inproc}} {
		for _, s := range sides {
			r := ph.runs[s.name]
			apiADD, apiDEL := "-", "-"
			if s.audit != nil {
				apiADD, apiDEL = fmt.Sprint(medianInt(r.add.reqs)), fmt.Sprint(medianInt(r.del.reqs))
			}
			fmt.Fprintf(&sb, "%-12s %-11s %8.1f %8.1f %8.1f %8.1f %8.1f %9s %9s\n", ph.name, s.name,
				millis(quantile(r.add.times, .5)), millis(quantile(r.add.times, .99)), millis(quantile(r.del.times, .5)), millis(quantile(r.del.times, .99)),
				millis(r.client/time.Duration(pods)), apiADD, apiDEL)
		}
		e, k := ph.runs["etcd"], ph.runs["kubernetes"]
		ratio := float64(quantile(k.add.times, .5)) / float64(quantile(e.add.times, .5))
		fmt.Fprintf(&sb, "%s: kubernetes/etcd ADD p50 %.2fx, ADD p99 %.2fx, DEL p50 %.2fx\n", ph.name, ratio,
			float64(quantile(k.add.times, .99))/float64(quantile(e.add.times, .99)), float64(quantile(k.del.times, .5))/float64(quantile(e.del.times, .5)))
		key := map[string]string{"agent": "agent", "in-process": "inproc"}[ph.name]
		b.ReportMetric(millis(quantile(e.add.times, .5)), key+"-etcd-add-p50-ms")
		b.ReportMetric(millis(quantile(k.add.times, .5)), key+"-kdd-add-p50-ms")
		b.ReportMetric(ratio, key+"-kdd/etcd-add-p50")
		b.ReportMetric(float64(medianInt(k.add.reqs)), key+"-api-requests/add")
		b.ReportMetric(float64(medianInt(k.del.reqs)), key+"-api-requests/del")
	}
	k := agent["kubernetes"]
	fmt.Fprintf(&sb, "apiserver requests per ADD: ours %d (agent) / %d (in-process), Calico v3.32.1's %d; per DEL ours %d / %d, Calico's %d\n",
		medianInt(k.add.reqs), medianInt(inproc["kubernetes"].add.reqs), calicoADD, medianInt(k.del.reqs), medianInt(inproc["kubernetes"].del.reqs), calicoDEL)
	fmt.Fprintf(&sb, "the last ADD's requests (agent):\n  %s", strings.Join(lines(k.add.last), "\n  "))
	b.Log(sb.String())
	b.ReportMetric(float64(calicoADD), "calico-api-requests/add")
}
