package e2e

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
)

// kddBurst is one side's figures for one burst: every call's time and the
// burst's wall time, first call started to last ended.
type kddBurst struct {
	add, del         []time.Duration
	addWall, delWall time.Duration
}

// burstCalls runs call for every runtime at once and returns each call's
// time and the wall time of them all; the first error stops the benchmark.
func burstCalls(b *testing.B, rts []*libcni.RuntimeConf, call func(*libcni.RuntimeConf) error) ([]time.Duration, time.Duration) {
	times := make([]time.Duration, len(rts))
	errs := make([]error, len(rts))
	var wg sync.WaitGroup
	t0 := time.Now()
	for i, rt := range rts {
		wg.Go(func() {
			s := time.Now()
			errs[i] = call(rt)
			times[i] = time.Since(s)
		})
	}
	wg.Wait()
	wall := time.Since(t0)
	for i, err := range errs {
		if err != nil {
			b.Fatalf("%s: %v", rts[i].ContainerID, err)
		}
	}
	return times, wall
}

// BenchmarkKDDCNIBurst is BenchmarkKDDCNI's two nodes (etcd and
// Kubernetes, calico-node serving the plugin's calls) given a burst of
// pods at once, as a kubelet starts a batch of pods scheduled together:
// KDD_BURST_PODS ADDs at the same time (default 40), then their DELs at
// the same time, the sides' bursts alternating for KDD_BURST_ROUNDS rounds
// (default 2), each burst on idle agents. Reports each side's wall time
// per burst and its per-call p50 and p99, and the Kubernetes side's wall
// time as a ratio to etcd's. KDD_BENCH_KEEP_AUDIT keeps the apiservers'
// audit logs (BenchmarkKDDCNI).
func BenchmarkKDDCNIBurst(b *testing.B) {
	pods, rounds := kbEnvInt("KDD_BURST_PODS", 40), kbEnvInt("KDD_BURST_ROUNDS", 2)
	sides := kddBenchSides(b, 195, 196, false)
	for _, s := range sides { // page cache, the first block claim
		kddCNIPhase(b, []*kddBenchSide{s}, "warm-", 1)
	}
	runs := map[string]*kddBurst{}
	for _, s := range sides {
		runs[s.name] = &kddBurst{}
	}
	interleaved(sides, rounds, func(round int, s *kddBenchSide) {
		var rts []*libcni.RuntimeConf
		for i := range pods {
			name := fmt.Sprintf("r%d-%04d", round, i)
			s.e.createPodWith(b, "bench", name, "runner", map[string]string{"app": "bench"}, nil, nil)
			rts = append(rts, podRuntime(b, "bench", name))
		}
		r := runs[s.name]
		kddIdle(b, sides)
		times, wall := burstCalls(b, rts, func(rt *libcni.RuntimeConf) error {
			res, err := s.e.add(s.l, rt)
			if err == nil {
				if v4, _ := podAddrs(res); v4 == "" {
					err = fmt.Errorf("ADD: no address")
				}
			}
			return err
		})
		r.add, r.addWall = append(r.add, times...), r.addWall+wall
		kddIdle(b, sides)
		times, wall = burstCalls(b, rts, func(rt *libcni.RuntimeConf) error { return s.e.del(s.l, rt) })
		r.del, r.delWall = append(r.del, times...), r.delWall+wall
	})
	keepAudit(sides)
	for _, s := range sides {
		if n := s.agent.servedCalls(); n < 2*pods*rounds {
			b.Fatalf("%s: the agent served %d calls, want the bursts' %d ADDs and DELs", s.name, n, 2*pods*rounds)
		}
		s.e.t = b
		s.e.assertClean()
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "bursts of %d pods, %d per side (ms)\n%-11s %10s %8s %8s %10s %8s %8s\n", pods, rounds,
		"datastore", "ADD burst", "ADD p50", "ADD p99", "DEL burst", "DEL p50", "DEL p99")
	for _, s := range sides {
		r := runs[s.name]
		n := time.Duration(rounds)
		fmt.Fprintf(&sb, "%-11s %10.1f %8.1f %8.1f %10.1f %8.1f %8.1f\n", s.name, millis(r.addWall/n), millis(quantile(r.add, .5)),
			millis(quantile(r.add, .99)), millis(r.delWall/n), millis(quantile(r.del, .5)), millis(quantile(r.del, .99)))
		key := map[string]string{"etcd": "etcd", "kubernetes": "kdd"}[s.name]
		b.ReportMetric(millis(r.addWall/n), key+"-add-burst-ms")
		b.ReportMetric(millis(r.delWall/n), key+"-del-burst-ms")
	}
	e, k := runs["etcd"], runs["kubernetes"]
	fmt.Fprintf(&sb, "kubernetes/etcd: ADD burst %.2fx, DEL burst %.2fx", float64(k.addWall)/float64(e.addWall), float64(k.delWall)/float64(e.delWall))
	b.ReportMetric(float64(k.addWall)/float64(e.addWall), "kdd/etcd-add-burst")
	b.ReportMetric(float64(k.delWall)/float64(e.delWall), "kdd/etcd-del-burst")
	b.Log(sb.String())
}
