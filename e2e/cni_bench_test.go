package e2e

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
)

// cniRun is one plugin set's figures.
type cniRun struct {
	add, del   []time.Duration
	parallel   time.Duration
	cpuPerAdd  time.Duration // plugin processes + agent
	agentCPU   time.Duration // the agent's part of cpuPerAdd
	pods       int
	parallelN  int
	name, desc string
}

func (r cniRun) p(d []time.Duration, q float64) time.Duration { return quantile(d, q) }

// quantile is the q quantile (nearest rank below) of d.
func quantile(d []time.Duration, q float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[int(q*float64(len(s)-1))]
}

// millis is a duration in milliseconds, for ReportMetric and tables.
func millis(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func childCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// cniVariant is one plugin set: a conflist and where libcni finds its
// plugins.
type cniVariant struct {
	name, prefix string
	l            *libcni.NetworkConfigList
	cfg          *libcni.CNIConfig
	agent        *agentProc // serving the calls: its CPU counts too
}

// agentCPU is the CPU calico-node has used so far (/proc, clock ticks of
// 10 ms: summed over many calls).
func (v cniVariant) agentCPU(b *testing.B) time.Duration {
	if v.agent == nil {
		return 0
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", v.agent.cmd.Process.Pid))
	if err != nil {
		b.Fatal(err)
	}
	f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+2:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64) // utime, stime: fields 14 and 15
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// measureAll drives the variants through libcni with fresh namespaces:
// sequential ADDs, then DELs, interleaved pod by pod so that every variant
// sees the same machine (this shared machine's speed drifts), then each
// variant's parallel ADDs.
func measureAll(b *testing.B, e *cniEnv, vs []cniVariant, pods, parallel int) []cniRun {
	runs := make([]cniRun, len(vs))
	rts := make([][]*libcni.RuntimeConf, len(vs))
	var cpu = make([]time.Duration, len(vs))
	var agentCPU = make([]time.Duration, len(vs))
	for j, v := range vs {
		runs[j] = cniRun{name: v.name, pods: pods, parallelN: parallel}
		for i := 0; i < pods; i++ {
			rts[j] = append(rts[j], &libcni.RuntimeConf{ContainerID: fmt.Sprintf("%s%06d", v.prefix, i), NetNS: newNS(b).Path(), IfName: "eth0"})
		}
	}
	orig := e.cfg
	defer func() { e.cfg = orig }()
	for i := 0; i < pods; i++ {
		for j, v := range vs {
			e.cfg = v.cfg
			cpu0, acpu0, t0 := childCPU(), v.agentCPU(b), time.Now()
			if _, err := e.add(v.l, rts[j][i]); err != nil {
				b.Fatalf("%s ADD %d: %v", v.name, i, err)
			}
			runs[j].add = append(runs[j].add, time.Since(t0))
			a := v.agentCPU(b) - acpu0
			cpu[j] += childCPU() - cpu0 + a
			agentCPU[j] += a
		}
	}
	for j := range vs {
		runs[j].cpuPerAdd = cpu[j] / time.Duration(pods)
		runs[j].agentCPU = agentCPU[j] / time.Duration(pods)
	}
	for i := 0; i < pods; i++ {
		for j, v := range vs {
			e.cfg = v.cfg
			t0 := time.Now()
			if err := e.del(v.l, rts[j][i]); err != nil {
				b.Fatalf("%s DEL: %v", v.name, err)
			}
			runs[j].del = append(runs[j].del, time.Since(t0))
		}
	}
	for j, v := range vs {
		e.cfg = v.cfg
		par := make([]*libcni.RuntimeConf, parallel)
		for i := range par {
			par[i] = &libcni.RuntimeConf{ContainerID: fmt.Sprintf("%spar%04d", v.prefix, i), NetNS: newNS(b).Path(), IfName: "eth0"}
		}
		var wg sync.WaitGroup
		t0 := time.Now()
		for _, rt := range par {
			wg.Add(1)
			go func(rt *libcni.RuntimeConf) {
				defer wg.Done()
				if _, err := e.add(v.l, rt); err != nil {
					b.Errorf("%s parallel ADD: %v", v.name, err)
				}
			}(rt)
		}
		wg.Wait()
		runs[j].parallel = time.Since(t0)
		for _, rt := range par {
			_ = e.del(v.l, rt)
		}
	}
	return runs
}

// BenchmarkCNI runs our plugin through the agent, our plugin in-process
// (no agent serving its run dir: the fallback) and the reference ptp +
// host-local side by side in one run, all through libcni with a fresh
// namespace per pod. The agent's CPU during each ADD (its dataplane work
// meanwhile included) is added to the plugin's.
func BenchmarkCNI(b *testing.B) {
	pods, parallel := 300, 50
	if n := os.Getenv("CNI_BENCH_PODS"); n != "" {
		pods, _ = strconv.Atoi(n)
	}
	e := newCNIEnv(b, 20)
	referencePlugins(b, e.bin)
	createPool(b, e.cl, "bench", "10.110.0.0/16", 26)
	agent := e.startAgent("node1")
	ours := e.conflist("1.0.0", "bench", e.calicoPlugin("node1", ""))
	// The same plugin with a run dir no agent serves: the in-process path.
	inproc := e.conflist("1.0.0", "inproc", strings.Replace(e.calicoPlugin("node1", ""), e.state+"/run", e.state+"/run-inproc", 1))
	ptp := e.conflist("1.0.0", "ptp", fmt.Sprintf(`{"type":"ptp","ipam":{"type":"host-local","subnet":"10.111.0.0/16","dataDir":%q}}`, e.state+"/hl"))

	vs := []cniVariant{{"calico agent", "ours", ours, e.cfg, agent}, {"calico in-proc", "inpr", inproc, e.cfg, nil}, {"ptp+host-local", "ptp", ptp, e.cfg, nil}}

	// Warm each (page cache, first block claim) before measuring.
	for _, v := range vs {
		rt := &libcni.RuntimeConf{ContainerID: "warm-" + v.prefix, NetNS: newNS(b).Path(), IfName: "eth0"}
		orig := e.cfg
		e.cfg = v.cfg
		if _, err := e.add(v.l, rt); err != nil {
			b.Fatal(err)
		}
		_ = e.del(v.l, rt)
		e.cfg = orig
	}
	results := measureAll(b, e, vs, pods, parallel)
	o, in, p := results[0], results[1], results[2]
	b.Logf("\n%-16s %10s %10s %10s %10s %14s %12s %12s\n", "plugin", "ADD p50", "ADD p99", "DEL p50", "DEL p99", "50 par. ADDs", "CPU/ADD", "of it agent")
	for _, r := range results {
		b.Logf("%-16s %8.1fms %8.1fms %8.1fms %8.1fms %12.0fms %10.1fms %10.1fms", r.name, millis(r.p(r.add, .5)), millis(r.p(r.add, .99)),
			millis(r.p(r.del, .5)), millis(r.p(r.del, .99)), millis(r.parallel), millis(r.cpuPerAdd), millis(r.agentCPU))
	}
	b.ReportMetric(millis(o.p(o.add, .5)), "ours-add-p50-ms")
	b.ReportMetric(millis(o.p(o.add, .99)), "ours-add-p99-ms")
	b.ReportMetric(millis(o.p(o.del, .5)), "ours-del-p50-ms")
	b.ReportMetric(millis(o.parallel), "ours-50par-ms")
	b.ReportMetric(millis(o.cpuPerAdd), "ours-cpu/add-ms")
	b.ReportMetric(millis(o.agentCPU), "ours-agent-cpu/add-ms")
	b.ReportMetric(millis(in.p(in.add, .5)), "inproc-add-p50-ms")
	b.ReportMetric(millis(in.p(in.del, .5)), "inproc-del-p50-ms")
	b.ReportMetric(millis(in.parallel), "inproc-50par-ms")
	b.ReportMetric(millis(in.cpuPerAdd), "inproc-cpu/add-ms")
	b.ReportMetric(millis(p.p(p.add, .5)), "ptp-add-p50-ms")
	b.ReportMetric(millis(p.p(p.del, .5)), "ptp-del-p50-ms")
	b.ReportMetric(millis(p.parallel), "ptp-50par-ms")
	b.ReportMetric(float64(o.p(o.add, .5))/float64(p.p(p.add, .5)), "add-p50-ratio")
	b.ReportMetric(float64(o.p(o.del, .5))/float64(p.p(p.del, .5)), "del-p50-ratio")
	b.ReportMetric(float64(o.parallel)/float64(p.parallel), "50par-ratio")
}
