package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"

	"github.com/calico-aio/calico-aio/internal/proccpu"
)

// cniRun is one plugin set's figures.
type cniRun struct {
	add, del  []time.Duration
	parallel  time.Duration
	cpuPerAdd time.Duration // plugin processes + agent (serving and dataplane)
	client    time.Duration // the plugin processes' part of cpuPerAdd
	serve     time.Duration // the agent's part during the call
	dataplane time.Duration // the agent's part after the call until it is idle again
	pods      int
	parallelN int
	name      string
	desc      string
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

// childCPU is the user + system time of the children this process has
// waited for (the plugins libcni exec'd, and the processes they waited
// for: calico-ipam, host-local).
func childCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru)
	return rusageCPU(&ru)
}

// rusageCPU is a rusage's user + system time.
func rusageCPU(ru *syscall.Rusage) time.Duration {
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// cpu is the CPU calico-node has used so far, its children included: its
// own utime + stime, what its waited-for children used (iptables-save,
// ipset; cutime + cstime), and what its live descendants (the long-lived
// iptables-restores) have used so far (internal/proccpu: clock ticks of
// 10 ms, so only sums over many calls mean much).
func (a *agentProc) cpu(b *testing.B) time.Duration {
	cpu, err := proccpu.Tree(a.cmd.Process.Pid)
	if err != nil {
		b.Fatal(err)
	}
	return cpu
}

// restoreCPU is the CPU so far of the agent's live iptables-restore and
// ip6tables-restore processes (the nf_tables backend's long-lived restore
// sessions): their parsing and the kernel's commit of each restore,
// validation of the whole table included, which on the agent's CPU
// alone would not show.
func (a *agentProc) restoreCPU() time.Duration {
	var cpu time.Duration
	for _, kid := range proccpu.Children(a.cmd.Process.Pid) {
		// argv[0], not comm: comm is cut at 15 bytes ("ip6tables-resto",
		// "iptables-nft-re").
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", kid))
		name := filepath.Base(string(bytes.SplitN(cmdline, []byte{0}, 2)[0]))
		if err != nil || !strings.HasPrefix(name, "ip") || !strings.Contains(name, "tables") || !strings.HasSuffix(name, "-restore") {
			continue
		}
		if n, err := proccpu.Tree(kid); err == nil {
			cpu += n
		}
	}
	return cpu
}

// settle waits until the agent has used no CPU for two polls in a row (its
// dataplane done with the last call's endpoint) and returns its CPU then.
// Every call of every variant starts on an idle agent.
func (a *agentProc) settle(b *testing.B) time.Duration {
	last := a.cpu(b)
	for quiet, deadline := 0, time.Now().Add(5*time.Second); quiet < 2 && time.Now().Before(deadline); {
		time.Sleep(40 * time.Millisecond)
		if c := a.cpu(b); c != last {
			quiet, last = 0, c
		} else {
			quiet++
		}
	}
	return last
}

// cniVariant is one plugin set: a conflist driven by libcni. countAgent:
// calico-node's CPU during and after each ADD is this variant's (it serves
// the call, or programs the endpoint the call wrote).
type cniVariant struct {
	name, prefix string
	l            *libcni.NetworkConfigList
	countAgent   bool
	cfg          *libcni.CNIConfig // where libcni finds the plugins
}

// parallelRounds is how many parallel bursts each variant runs.
const parallelRounds = 3

// execFloor is the CPU of exec'ing a static Go program that does nothing:
// the floor under any Go CNI plugin's CPU per call on this machine.
type execFloor struct {
	bin string
	sum time.Duration
	n   int
}

func newExecFloor(b *testing.B) *execFloor {
	dir := b.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte("package main\n\nfunc main() {}\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module empty\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command("go", "build", "-trimpath", "-o", "empty", ".")
	cmd.Dir, cmd.Env = dir, append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("building the empty program: %v\n%s", err, out)
	}
	return &execFloor{bin: filepath.Join(dir, "empty")}
}

func (f *execFloor) run(b *testing.B) {
	cmd := exec.Command(f.bin)
	if err := cmd.Run(); err != nil {
		b.Fatal(err)
	}
	f.sum += rusageCPU(cmd.ProcessState.SysUsage().(*syscall.Rusage))
	f.n++
}

func (f *execFloor) perRun() time.Duration { return f.sum / time.Duration(max(f.n, 1)) }

// measureAll drives the variants through libcni with fresh namespaces:
// sequential ADDs, then DELs, interleaved pod by pod so that every variant
// sees the same machine (this shared machine's speed drifts), then each
// variant's parallel ADDs. With an agent, every call starts once it is
// idle, and its CPU until it is idle again is split into serving (during
// the call) and dataplane (after it).
func measureAll(b *testing.B, e *cniEnv, vs []cniVariant, pods, parallel int, agent *agentProc, floor *execFloor) []cniRun {
	runs := make([]cniRun, len(vs))
	rts := make([][]*libcni.RuntimeConf, len(vs))
	for j, v := range vs {
		runs[j] = cniRun{name: v.name, pods: pods, parallelN: parallel}
		for i := 0; i < pods; i++ {
			rts[j] = append(rts[j], &libcni.RuntimeConf{ContainerID: fmt.Sprintf("%s%06d", v.prefix, i), NetNS: newNS(b).Path(), IfName: "eth0"})
		}
	}
	orig := e.cfg
	defer func() { e.cfg = orig }()
	idle := func() time.Duration {
		if agent == nil {
			return 0
		}
		return agent.settle(b)
	}
	for i := 0; i < pods; i++ {
		floor.run(b)
		for j, v := range vs {
			a0 := idle()
			e.cfg = v.cfg
			c0, t0 := childCPU(), time.Now()
			if _, err := e.add(v.l, rts[j][i]); err != nil {
				b.Fatalf("%s ADD %d: %v", v.name, i, err)
			}
			runs[j].add = append(runs[j].add, time.Since(t0))
			runs[j].client += childCPU() - c0
			if agent != nil && v.countAgent {
				a1 := agent.cpu(b)
				runs[j].serve += a1 - a0
				runs[j].dataplane += idle() - a1
			}
		}
	}
	for j := range runs {
		r := &runs[j]
		r.client /= time.Duration(pods)
		r.serve /= time.Duration(pods)
		r.dataplane /= time.Duration(pods)
		r.cpuPerAdd = r.client + r.serve + r.dataplane
	}
	for i := 0; i < pods; i++ {
		for j, v := range vs {
			idle()
			e.cfg = v.cfg
			t0 := time.Now()
			if err := e.del(v.l, rts[j][i]); err != nil {
				b.Fatalf("%s DEL: %v", v.name, err)
			}
			runs[j].del = append(runs[j].del, time.Since(t0))
		}
	}
	// Parallel bursts, interleaved too: each variant's burst in turn,
	// parallelRounds times; the median burst counts.
	bursts := make([][]time.Duration, len(vs))
	for round := 0; round < parallelRounds; round++ {
		for j, v := range vs {
			par := make([]*libcni.RuntimeConf, parallel)
			for i := range par {
				par[i] = &libcni.RuntimeConf{ContainerID: fmt.Sprintf("%spar%d-%04d", v.prefix, round, i), NetNS: newNS(b).Path(), IfName: "eth0"}
			}
			idle()
			e.cfg = v.cfg
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
			bursts[j] = append(bursts[j], time.Since(t0))
			idle()
			for _, rt := range par {
				if err := e.del(v.l, rt); err != nil {
					b.Errorf("%s DEL after the burst: %v", v.name, err)
				}
			}
		}
	}
	for j := range runs {
		runs[j].parallel = quantile(bursts[j], .5)
	}
	return runs
}

// warm runs one ADD and DEL of each variant (page cache, first block
// claim) before measuring.
func warm(b *testing.B, e *cniEnv, vs []cniVariant) {
	orig := e.cfg
	defer func() { e.cfg = orig }()
	for _, v := range vs {
		e.cfg = v.cfg
		rt := &libcni.RuntimeConf{ContainerID: "warm-" + v.prefix, NetNS: newNS(b).Path(), IfName: "eth0"}
		if _, err := e.add(v.l, rt); err != nil {
			b.Fatalf("warm-up %s: %v", v.name, err)
		}
		if err := e.del(v.l, rt); err != nil {
			b.Fatalf("warm-up %s DEL: %v", v.name, err)
		}
	}
}

// table is the figures of both phases in one log call (a benchmark's log
// is cut after 10 lines unless -v).
func table(pods, parallel int, floor *execFloor, phases map[string][]cniRun, order []string) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "%d pods each, interleaved (times in ms); exec of an empty static Go program: %.1f ms CPU (%d runs)\n", pods, millis(floor.perRun()), floor.n)
	fmt.Fprintf(&sb, "%-8s %-20s %8s %8s %8s %8s %8s %8s %8s %8s %9s\n", "agent", "plugin", "ADD p50", "ADD p99", "DEL p50", "DEL p99",
		fmt.Sprintf("%d par.", parallel), "CPU/ADD", "client", "serving", "dataplane")
	for _, ph := range order {
		for _, r := range phases[ph] {
			fmt.Fprintf(&sb, "%-8s %-20s %8.1f %8.1f %8.1f %8.1f %8.0f %8.1f %8.1f %8.1f %9.1f\n", ph, r.name,
				millis(r.p(r.add, .5)), millis(r.p(r.add, .99)), millis(r.p(r.del, .5)), millis(r.p(r.del, .99)),
				millis(r.parallel), millis(r.cpuPerAdd), millis(r.client), millis(r.serve), millis(r.dataplane))
		}
	}
	for _, ph := range order {
		runs := phases[ph]
		p := runs[len(runs)-1]
		fmt.Fprintf(&sb, "%s, against %s:", ph, p.name)
		for i, o := range runs[:len(runs)-1] {
			if i > 0 {
				sb.WriteString(";")
			}
			fmt.Fprintf(&sb, " %s ADD p50 %.2fx, DEL p50 %.2fx, parallel %.2fx, CPU per ADD %.2fx", o.name,
				float64(o.p(o.add, .5))/float64(p.p(p.add, .5)), float64(o.p(o.del, .5))/float64(p.p(p.del, .5)),
				float64(o.parallel)/float64(p.parallel), float64(o.cpuPerAdd)/float64(p.cpuPerAdd))
		}
		sb.WriteString("\n")
	}
	return strings.TrimSuffix(sb.String(), "\n")
}

func reportRuns(b *testing.B, key string, o, p cniRun) {
	b.ReportMetric(millis(o.p(o.add, .5)), key+"-add-p50-ms")
	b.ReportMetric(millis(o.p(o.del, .5)), key+"-del-p50-ms")
	b.ReportMetric(millis(o.parallel), key+"-50par-ms")
	b.ReportMetric(millis(o.cpuPerAdd), key+"-cpu/add-ms")
	b.ReportMetric(float64(o.p(o.add, .5))/float64(p.p(p.add, .5)), key+"-add-p50-ratio")
	b.ReportMetric(float64(o.p(o.del, .5))/float64(p.p(p.del, .5)), key+"-del-p50-ratio")
	b.ReportMetric(float64(o.parallel)/float64(p.parallel), key+"-50par-ratio")
	b.ReportMetric(float64(o.cpuPerAdd)/float64(p.cpuPerAdd), key+"-cpu-ratio")
}

// newCNIBench is what the CNI benchmarks share: a host (test host index
// hostIndex) with the reference plugins and a pool, the exec floor, calico-node
// with --resync-interval resync, and the conflists of our plugin and of
// ptp + host-local (its state in the host's state directory).
func newCNIBench(b *testing.B, hostIndex int, resync string) (e *cniEnv, floor *execFloor, agent *agentProc, ours, ptp *libcni.NetworkConfigList) {
	return newCNIBenchAgent(b, hostIndex, resync, agentBuild{})
}

// newCNIBenchAgent is newCNIBench with calico-node from build.
func newCNIBenchAgent(b *testing.B, hostIndex int, resync string, build agentBuild) (e *cniEnv, floor *execFloor, agent *agentProc, ours, ptp *libcni.NetworkConfigList) {
	e = newCNIEnv(b, hostIndex)
	e.agent = build
	referencePlugins(b, e.bin)
	createPool(b, e.cl, "bench", "10.110.0.0/16", 26)
	floor = newExecFloor(b)
	agent = e.startAgent("node1", "--resync-interval", resync)
	ours = e.conflist("1.0.0", "bench", e.calicoPlugin("node1", ""))
	ptp = e.conflist("1.0.0", "ptp", fmt.Sprintf(`{"type":"ptp","ipam":{"type":"host-local","subnet":"10.111.0.0/16","dataDir":%q}}`, e.state+"/hl"))
	return e, floor, agent, ours, ptp
}

// baselineVariant is our plugin from an older build of the binary named by
// the environment variable env (e.g. from before a change, for "no slower
// than before" in the same run), run in-process; nil when env is unset.
func baselineVariant(b *testing.B, e *cniEnv, env string, l *libcni.NetworkConfigList) *cniVariant {
	base := os.Getenv(env)
	if base == "" {
		return nil
	}
	dir := b.TempDir()
	for _, name := range []string{"calico", "calico-ipam"} {
		if err := os.Symlink(base, filepath.Join(dir, name)); err != nil {
			b.Fatal(err)
		}
	}
	cfg := libcni.NewCNIConfigWithCacheDir([]string{dir}, e.cache, nil)
	return &cniVariant{"baseline in-process", "base", l, false, cfg}
}

// BenchmarkCNI compares our plugin with the reference ptp + host-local,
// interleaved pod by pod, all through libcni with a fresh namespace per
// pod, in two phases of one run: with calico-node running (the calls go
// through the agent), then with calico-node stopped (the plugin falls back
// in-process). The agent's CPU for each ADD (serving it, then programming
// the new endpoint) is added to the plugin's; an empty static Go program
// exec'd once per round prices the floor under any exec'd Go plugin.
// CNI_BENCH_BASELINE names an older build of the binary to run in-process
// in the second phase too (e.g. from before the fast path);
// CNI_BENCH_PODS and CNI_BENCH_PARALLEL shorten a trial run.
func BenchmarkCNI(b *testing.B) {
	pods, parallel := 300, 50
	if n := os.Getenv("CNI_BENCH_PODS"); n != "" {
		pods, _ = strconv.Atoi(n)
	}
	if n := os.Getenv("CNI_BENCH_PARALLEL"); n != "" {
		parallel, _ = strconv.Atoi(n)
	}
	// The product's default resync period (the harness's is shorter).
	e, floor, agent, ours, ptp := newCNIBench(b, 20, "30s")

	withAgent := []cniVariant{{"calico via agent", "ours", ours, true, e.cfg}, {"ptp+host-local", "ptp", ptp, false, e.cfg}}
	warm(b, e, withAgent)
	r1 := measureAll(b, e, withAgent, pods, parallel, agent, floor)
	if served := agent.servedCalls(); served < 2*pods {
		b.Fatalf("the agent served %d calls, want at least the %d ADDs and DELs", served, 2*pods)
	}
	agent.stop()
	if _, err := os.Stat(filepath.Join(e.state, "run", "cni.sock")); err == nil {
		b.Fatal("the stopped agent left its socket behind")
	}

	stopped := []cniVariant{{"calico in-process", "inpr", ours, false, e.cfg}, {"ptp+host-local", "ptp2", ptp, false, e.cfg}}
	if base := baselineVariant(b, e, "CNI_BENCH_BASELINE", ours); base != nil {
		stopped = slices.Insert(stopped, 1, *base)
	}
	warm(b, e, stopped)
	r2 := measureAll(b, e, stopped, pods, parallel, nil, floor)

	b.Log(table(pods, parallel, floor, map[string][]cniRun{"running": r1, "stopped": r2}, []string{"running", "stopped"}))
	reportRuns(b, "agent", r1[0], r1[len(r1)-1])
	reportRuns(b, "inproc", r2[0], r2[len(r2)-1])
	if len(r2) == 3 {
		reportRuns(b, "baseline", r2[1], r2[2])
	}
	b.ReportMetric(millis(r1[0].client), "agent-client-cpu/add-ms")
	b.ReportMetric(millis(r1[0].serve), "agent-serve-cpu/add-ms")
	b.ReportMetric(millis(r1[0].dataplane), "agent-dataplane-cpu/add-ms")
	b.ReportMetric(millis(floor.perRun()), "exec-floor-cpu-ms")
}
