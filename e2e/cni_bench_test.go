package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/plugins/pkg/ns"
)

// cniRun is one plugin set's figures.
type cniRun struct {
	add, del   []time.Duration
	parallel   time.Duration
	cpuPerAdd  time.Duration
	pods       int
	parallelN  int
	name, desc string
}

func (r cniRun) p(d []time.Duration, q float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[int(q*float64(len(s)-1))]
}

func childCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// measure drives one conflist through libcni: sequential ADDs then DELs of
// fresh namespaces, then parallel ADDs.
func measure(b *testing.B, e *cniEnv, l *libcni.NetworkConfigList, prefix string, pods, parallel int) cniRun {
	r := cniRun{pods: pods, parallelN: parallel}
	nss := make([]ns.NetNS, pods)
	for i := range nss {
		nss[i] = newNS(b)
	}
	rts := make([]*libcni.RuntimeConf, pods)
	cpu0 := childCPU()
	for i := range nss {
		rts[i] = &libcni.RuntimeConf{ContainerID: fmt.Sprintf("%s%06d", prefix, i), NetNS: nss[i].Path(), IfName: "eth0"}
		t0 := time.Now()
		if _, err := e.add(l, rts[i]); err != nil {
			b.Fatalf("%s ADD %d: %v", prefix, i, err)
		}
		r.add = append(r.add, time.Since(t0))
	}
	r.cpuPerAdd = (childCPU() - cpu0) / time.Duration(pods)
	for _, rt := range rts {
		t0 := time.Now()
		if err := e.del(l, rt); err != nil {
			b.Fatalf("%s DEL: %v", prefix, err)
		}
		r.del = append(r.del, time.Since(t0))
	}
	par := make([]*libcni.RuntimeConf, parallel)
	for i := range par {
		par[i] = &libcni.RuntimeConf{ContainerID: fmt.Sprintf("%spar%04d", prefix, i), NetNS: newNS(b).Path(), IfName: "eth0"}
	}
	var wg sync.WaitGroup
	t0 := time.Now()
	for _, rt := range par {
		wg.Add(1)
		go func(rt *libcni.RuntimeConf) {
			defer wg.Done()
			if _, err := e.add(l, rt); err != nil {
				b.Errorf("%s parallel ADD: %v", prefix, err)
			}
		}(rt)
	}
	wg.Wait()
	r.parallel = time.Since(t0)
	for _, rt := range par {
		_ = e.del(l, rt)
	}
	return r
}

// BenchmarkCNI runs our plugin and the reference ptp + host-local side by
// side in one run, both through libcni with a fresh namespace per pod.
func BenchmarkCNI(b *testing.B) {
	pods, parallel := 300, 50
	if n := os.Getenv("CNI_BENCH_PODS"); n != "" {
		pods, _ = strconv.Atoi(n)
	}
	e := newCNIEnv(b, 20)
	referencePlugins(b, e.bin)
	createPool(b, e.cl, "bench", "10.110.0.0/16", 26)
	createNode(b, e.cl, "node1")
	ours := e.conflist("1.0.0", "bench", e.calicoPlugin("node1", ""))
	ptp := e.conflist("1.0.0", "ptp", fmt.Sprintf(`{"type":"ptp","ipam":{"type":"host-local","subnet":"10.111.0.0/16","dataDir":%q}}`, e.state+"/hl"))

	// Warm both (page cache, first block claim) before measuring.
	warm := func(l *libcni.NetworkConfigList, id string) {
		rt := &libcni.RuntimeConf{ContainerID: id, NetNS: newNS(b).Path(), IfName: "eth0"}
		if _, err := e.add(l, rt); err != nil {
			b.Fatal(err)
		}
		_ = e.del(l, rt)
	}
	warm(ours, "warm-ours")
	warm(ptp, "warm-ptp")

	results := []cniRun{measure(b, e, ours, "ours", pods, parallel), measure(b, e, ptp, "ptp", pods, parallel)}
	results[0].name, results[1].name = "calico (ours)", "ptp+host-local"
	// The same plugin code built with -tags cnionly: what a binary without
	// calico-node's and calicoctl's packages would start in (not shipped).
	lean := withPluginDir(e, leanPluginDir(b), func() cniRun {
		warm(ours, "warm-lean")
		return measure(b, e, ours, "lean", pods, parallel)
	})
	lean.name = "calico cnionly"
	results = append(results, lean)
	o, p := results[0], results[1]
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.Logf("\n%-16s %10s %10s %10s %10s %14s %12s\n", "plugin", "ADD p50", "ADD p99", "DEL p50", "DEL p99", "50 par. ADDs", "CPU/ADD")
	for _, r := range results {
		b.Logf("%-16s %8.1fms %8.1fms %8.1fms %8.1fms %12.0fms %10.1fms", r.name, ms(r.p(r.add, .5)), ms(r.p(r.add, .99)),
			ms(r.p(r.del, .5)), ms(r.p(r.del, .99)), ms(r.parallel), ms(r.cpuPerAdd))
	}
	b.ReportMetric(ms(o.p(o.add, .5)), "ours-add-p50-ms")
	b.ReportMetric(ms(o.p(o.add, .99)), "ours-add-p99-ms")
	b.ReportMetric(ms(o.p(o.del, .5)), "ours-del-p50-ms")
	b.ReportMetric(ms(o.parallel), "ours-50par-ms")
	b.ReportMetric(ms(o.cpuPerAdd), "ours-cpu/add-ms")
	b.ReportMetric(ms(p.p(p.add, .5)), "ptp-add-p50-ms")
	b.ReportMetric(ms(p.p(p.del, .5)), "ptp-del-p50-ms")
	b.ReportMetric(ms(p.parallel), "ptp-50par-ms")
	b.ReportMetric(ms(lean.p(lean.add, .5)), "cnionly-add-p50-ms")
	b.ReportMetric(ms(lean.cpuPerAdd), "cnionly-cpu/add-ms")
	b.ReportMetric(float64(o.p(o.add, .5))/float64(p.p(p.add, .5)), "add-p50-ratio")
	b.ReportMetric(float64(o.p(o.del, .5))/float64(p.p(p.del, .5)), "del-p50-ratio")
	b.ReportMetric(float64(o.parallel)/float64(p.parallel), "50par-ratio")
}

// leanPluginDir builds the binary with -tags cnionly (the CNI roles only)
// into a directory of its own as "calico".
func leanPluginDir(b *testing.B) string {
	dir := b.TempDir()
	cmd := exec.Command("go", "build", "-tags", "cnionly", "-trimpath", "-ldflags", "-s -w", "-o", filepath.Join(dir, "calico"), "..")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("building the cnionly binary: %v\n%s", err, out)
	}
	return dir
}

// withPluginDir runs f with libcni finding the plugins in dir.
func withPluginDir[T any](e *cniEnv, dir string, f func() T) T {
	orig := e.cfg
	e.cfg = libcni.NewCNIConfigWithCacheDir([]string{dir}, e.cache, nil)
	defer func() { e.cfg = orig }()
	return f()
}
