package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
)

// callCost is what one kind of call (ADD or DEL) of one plugin set cost
// over a phase: its latencies and its CPU, split as BenchmarkCNI splits it.
type callCost struct {
	lat                      []time.Duration
	client, serve, dataplane time.Duration // sums over lat's calls
	restore                  time.Duration // the restore sessions', from the call's start until idle
	applies                  int           // the agent's dataplane applies, from the call's start until idle
}

func (c callCost) p50() time.Duration { return quantile(c.lat, .5) }

// cpu is the CPU per call: client + agent serving + agent dataplane.
func (c callCost) cpu() time.Duration { return c.perCall(c.client + c.serve + c.dataplane) }

// cpuNetOfRestore is cpu without the restore sessions' share (their
// commits, the kernel's validation walk of the whole table included): the
// growth with the node that is not the kernel's (issue #25's decision).
func (c callCost) cpuNetOfRestore() time.Duration {
	return c.perCall(c.client + c.serve + c.dataplane - c.restore)
}

// perCall is a sum over c's calls divided by their number.
func (c callCost) perCall(sum time.Duration) time.Duration {
	return sum / time.Duration(max(len(c.lat), 1))
}

// podCost is one plugin set's figures at one number of pods on the node.
type podCost struct {
	name     string
	add, del callCost        // each call on an idle agent
	b2b      []time.Duration // ADD latencies, calls back to back
}

// podCostRig is the node of BenchmarkCNIPodCost: the environment, its agent
// (nil once stopped) and the plugin sets, ours first, the reference last.
type podCostRig struct {
	b     *testing.B
	e     *cniEnv
	agent *agentProc
	vs    []cniVariant
	floor *execFloor // run once per sample
	seq   int        // container IDs stay unique over the whole run
}

// idle waits for the agent to be idle (no-op without one) and returns its
// CPU then.
func (r *podCostRig) idle() time.Duration {
	if r.agent == nil {
		return 0
	}
	return r.agent.settle(r.b)
}

// pod is a fresh runtime config (and namespace) for variant v.
func (r *podCostRig) pod(v cniVariant) *libcni.RuntimeConf {
	r.seq++
	return &libcni.RuntimeConf{ContainerID: fmt.Sprintf("%s%06d", v.prefix, r.seq), NetNS: newNS(r.b).Path(), IfName: "eth0"}
}

// call runs one ADD or DEL of v on an idle agent and adds its latency and
// CPU to c: the plugin processes', and with countAgent the agent's during
// the call (serving) and after it until it is idle again (dataplane).
func (r *podCostRig) call(v cniVariant, c *callCost, what string, f func() error) {
	n0 := r.applies() // before idle: the scrape's own CPU is then over
	a0 := r.idle()
	var rs0 time.Duration
	if r.agent != nil && v.countAgent {
		rs0 = r.agent.restoreCPU()
	}
	r.e.cfg = v.cfg
	c0, t0 := childCPU(), time.Now()
	if err := f(); err != nil {
		r.b.Fatalf("%s %s: %v", v.name, what, err)
	}
	c.lat = append(c.lat, time.Since(t0))
	c.client += childCPU() - c0
	if r.agent == nil {
		return
	}
	if v.countAgent {
		a1 := r.agent.cpu(r.b)
		c.serve += a1 - a0
		c.dataplane += r.idle() - a1
		c.restore += r.agent.restoreCPU() - rs0
	} else {
		r.idle()
	}
	c.applies += r.applies() - n0
}

// applies is how many dataplane applies the agent has made (its
// felix_int_dataplane_apply_time_seconds summary's count); 0 without one.
func (r *podCostRig) applies() int {
	if r.agent == nil {
		return 0
	}
	s, err := r.agent.scrapeMetrics()
	if err != nil {
		r.b.Fatalf("counting the agent's applies: %v", err)
	}
	n, _ := s.Value("felix_int_dataplane_apply_time_seconds")
	return int(n)
}

func (r *podCostRig) add(v cniVariant, rt *libcni.RuntimeConf) error {
	_, err := r.e.add(v.l, rt)
	return err
}

// measure is measureRigs of r alone.
func (r *podCostRig) measure(n int) []podCost {
	return measureRigs([]*podCostRig{r}, n)[0]
}

// measureRigs is n samples of every rig, interleaved: in each sample, rig
// by rig, each variant's ADD, then each variant's DEL of that pod, every
// call on an idle agent, so each node keeps the pods it had. Then n ADDs
// per variant back to back, in bursts of b2bBurst (the agent still busy
// with the previous pods), each rig's and variant's burst in turn from an
// idle agent, each burst deleted after. The first rig's exec floor runs
// once per sample.
func measureRigs(rigs []*podCostRig, n int) [][]podCost {
	out := make([][]podCost, len(rigs))
	for k, r := range rigs {
		out[k] = make([]podCost, len(r.vs))
		for j, v := range r.vs {
			out[k][j].name = v.name
		}
	}
	for i := 0; i < n; i++ {
		rigs[0].floor.run(rigs[0].b)
		for k, r := range rigs {
			r.sample(out[k])
		}
	}
	for done := 0; done < n; done += b2bBurst {
		for k, r := range rigs {
			r.bursts(out[k], min(b2bBurst, n-done))
		}
	}
	return out
}

// sample is one pod of each variant: their ADDs, then their DELs.
func (r *podCostRig) sample(out []podCost) {
	orig := r.e.cfg
	defer func() { r.e.cfg = orig }()
	rts := make([]*libcni.RuntimeConf, len(r.vs))
	for j, v := range r.vs {
		rts[j] = r.pod(v)
		r.call(v, &out[j].add, "ADD", func() error { return r.add(v, rts[j]) })
	}
	for j, v := range r.vs {
		r.call(v, &out[j].del, "DEL", func() error { return r.e.del(v.l, rts[j]) })
	}
}

// bursts is one burst of n ADDs back to back per variant, each deleted
// after.
func (r *podCostRig) bursts(out []podCost, n int) {
	orig := r.e.cfg
	defer func() { r.e.cfg = orig }()
	for j, v := range r.vs {
		burst := make([]*libcni.RuntimeConf, n)
		r.idle()
		r.e.cfg = v.cfg
		for k := range burst {
			burst[k] = r.pod(v)
			t0 := time.Now()
			if err := r.add(v, burst[k]); err != nil {
				r.b.Fatalf("%s back-to-back ADD: %v", v.name, err)
			}
			out[j].b2b = append(out[j].b2b, time.Since(t0))
		}
		for _, rt := range burst {
			if err := r.e.del(v.l, rt); err != nil {
				r.b.Fatalf("%s DEL after the burst: %v", v.name, err)
			}
		}
	}
}

// b2bBurst is how many ADDs follow each other without waiting.
const b2bBurst = 5

// fill adds pods of our plugin (through the agent) until the node holds
// want of them, and waits for the agent to be idle.
func (r *podCostRig) fill(have, want int) {
	orig := r.e.cfg
	defer func() { r.e.cfg = orig }()
	v := r.vs[0]
	r.e.cfg = v.cfg
	fillV := cniVariant{name: v.name, prefix: "fill", l: v.l, cfg: v.cfg}
	for ; have < want; have++ {
		if err := r.add(fillV, r.pod(fillV)); err != nil {
			r.b.Fatalf("filling the node, pod %d: %v", have+1, err)
		}
	}
	if links := len(r.e.hostLinks()); links < want {
		r.b.Fatalf("the node holds %d cali links, want %d", links, want)
	}
	r.idle()
}

// fullNodeAgent is the calico-node build of the benchmark's second node:
// CNI_PODCOST_FULL_AGENT names another binary (an older build, say) and
// CNI_PODCOST_FULL_AGENT_ENV adds variables to its environment
// (space-separated NAME=value). With CNI_PODCOST_FEW equal to
// CNI_PODCOST_FULL, the "250 against 10 pods" ratios then compare the two
// builds or settings interleaved, at one node size.
func fullNodeAgent() agentBuild {
	return agentBuild{bin: os.Getenv("CNI_PODCOST_FULL_AGENT"), env: strings.Fields(os.Getenv("CNI_PODCOST_FULL_AGENT_ENV"))}
}

// fullNodeClient points the second node's calico and calico-ipam (in its
// CNI_PATH, dir) at CNI_PODCOST_FULL_CLIENT when set: another build of the
// binary, so that with equal sizes the two nodes compare two clients.
func fullNodeClient(b *testing.B, dir string) {
	bin := os.Getenv("CNI_PODCOST_FULL_CLIENT")
	if bin == "" {
		return
	}
	for _, name := range []string{"calico", "calico-ipam"} {
		p := filepath.Join(dir, name)
		if err := os.Remove(p); err != nil {
			b.Fatal(err)
		}
		if err := os.Symlink(bin, p); err != nil {
			b.Fatal(err)
		}
	}
}

// podCostSizes are the benchmark's sizes: pods on the node in the two
// phases, and samples per phase; CNI_PODCOST_FEW, CNI_PODCOST_FULL and
// CNI_PODCOST_SAMPLES override them (a quick trial run).
func podCostSizes(b *testing.B) (few, full, samples int) {
	few, full, samples = 10, 250, 100
	for _, s := range []struct {
		env string
		v   *int
	}{{"CNI_PODCOST_FEW", &few}, {"CNI_PODCOST_FULL", &full}, {"CNI_PODCOST_SAMPLES", &samples}} {
		if n := os.Getenv(s.env); n != "" {
			var err error
			if *s.v, err = strconv.Atoi(n); err != nil || *s.v < 1 {
				b.Fatalf("%s=%q: want a positive number", s.env, n)
			}
		}
	}
	if full < few {
		b.Fatalf("CNI_PODCOST_FULL (%d) is below CNI_PODCOST_FEW (%d)", full, few)
	}
	return few, full, samples
}

// BenchmarkCNIPodCost is issue #25's measure of what a pod costs the node,
// against ptp + host-local in one interleaved run, all through libcni with
// a fresh namespace per pod and calico-node at the product's refresh
// intervals, on two nodes measured interleaved, one with 10 of our pods and
// one with 250: CPU per ADD and per DEL counted as BenchmarkCNI counts it (plugin
// processes + agent serving + agent dataplane until idle, children
// included), each call starting on an idle agent; ADD p50 on an idle agent
// and back to back. Then, with the agent stopped, the in-process fallback's
// ADD p50 (CNI_PODCOST_BASELINE names an older build to run in-process
// beside it). Every figure of ours is also reported as a ratio to
// ptp + host-local's on the same node, and the 250-pod node's CPU per ADD
// and DEL as a ratio to the 10-pod node's.
func BenchmarkCNIPodCost(b *testing.B) {
	few, full, samples := podCostSizes(b)
	// Two nodes, each with its own datastore and agent (every refresh
	// interval at the product's default: "0"), one filled to few pods and
	// one to full, measured interleaved sample by sample: the VM's speed
	// drifts by tens of percent within minutes, so phases one after the
	// other would compare two speeds as well as two node sizes.
	newRig := func(hostIndex int, build agentBuild) *podCostRig {
		e, floor, agent, ours, ptp := newCNIBenchAgent(b, hostIndex, "0", build)
		r := &podCostRig{b: b, e: e, agent: agent, floor: floor, vs: []cniVariant{
			{"calico via agent", "ours", ours, true, e.cfg}, {"ptp+host-local", "ptp", ptp, false, e.cfg}}}
		warm(b, e, r.vs)
		return r
	}
	rigs := []*podCostRig{newRig(32, agentBuild{}), newRig(33, fullNodeAgent())}
	fullNodeClient(b, rigs[1].e.bin)
	sizes := []int{few, full}
	for k, r := range rigs {
		r.fill(len(r.e.hostLinks()), sizes[k])
	}
	runs := measureRigs(rigs, samples)
	neigh := neighbourEntries()
	var phases []podCostPhase
	for k, r := range rigs {
		phases = append(phases, podCostPhase{fmt.Sprintf("at%d", sizes[k]), fmt.Sprintf("%d pods, agent running", sizes[k]), runs[k], neigh})
		if want := sizes[k] + 2 + 4*samples; r.agent.servedCalls() < want {
			b.Fatalf("the agent of the %d-pod node served %d calls, want at least %d (the warm-up, the fill, and every ADD and DEL of ours)",
				sizes[k], r.agent.servedCalls(), want)
		}
		r.agent.stop()
		r.agent = nil
	}
	// The in-process fallback on the full node, agent stopped.
	r := rigs[1]
	e, ours, ptp := r.e, r.vs[0].l, r.vs[1].l
	r.vs = []cniVariant{{"calico in-process", "inpr", ours, false, e.cfg}, {"ptp+host-local", "ptp2", ptp, false, e.cfg}}
	if base := baselineVariant(b, e, "CNI_PODCOST_BASELINE", ours); base != nil {
		r.vs = slices.Insert(r.vs, 1, *base)
	}
	warm(b, e, r.vs)
	phases = append(phases, podCostPhase{"inproc", fmt.Sprintf("%d pods, agent stopped", full), r.measure(samples), neighbourEntries()})
	floor := rigs[0].floor
	b.Log(podCostTable(samples, floor, phases))
	for _, ph := range phases {
		reportPodCost(b, ph.key, ph.runs[0], ph.runs[len(ph.runs)-1])
	}
	lo, hi := phases[0].runs[0], phases[1].runs[0]
	b.ReportMetric(float64(hi.add.cpu())/float64(lo.add.cpu()), fmt.Sprintf("cpu/add-%dvs%d-ratio", full, few))
	b.ReportMetric(float64(hi.del.cpu())/float64(lo.del.cpu()), fmt.Sprintf("cpu/del-%dvs%d-ratio", full, few))
	b.ReportMetric(float64(hi.add.cpuNetOfRestore())/float64(lo.add.cpuNetOfRestore()), fmt.Sprintf("cpu/add-%dvs%d-net-of-restore-ratio", full, few))
	b.ReportMetric(float64(hi.del.cpuNetOfRestore())/float64(lo.del.cpuNetOfRestore()), fmt.Sprintf("cpu/del-%dvs%d-net-of-restore-ratio", full, few))
	// The same divided by ptp + host-local's own ratio between the two
	// nodes: what a fuller node costs any plugin (the kernel's share).
	plo, phi := phases[0].runs[len(phases[0].runs)-1], phases[1].runs[len(phases[1].runs)-1]
	b.ReportMetric(drifted(hi.add.cpu(), lo.add.cpu(), phi.add.cpu(), plo.add.cpu()), fmt.Sprintf("cpu/add-%dvs%d-per-ptp-ratio", full, few))
	b.ReportMetric(drifted(hi.del.cpu(), lo.del.cpu(), phi.del.cpu(), plo.del.cpu()), fmt.Sprintf("cpu/del-%dvs%d-per-ptp-ratio", full, few))
	b.ReportMetric(millis(floor.perRun()), "exec-floor-cpu-ms")
}

// podCostPhase is one phase's figures: runs[0] ours, the last the reference.
type podCostPhase struct {
	key, desc string
	runs      []podCost
	neigh     string
}

// neighbourEntries is the size of the kernel's neighbour tables, shared by
// every namespace on the machine (so by parallel tests too): gc_thresh3
// (1024 by default) bounds their non-permanent entries. Read through this
// thread's /proc entry: /proc/net follows the main thread, which may sit
// in a namespace a test has since removed.
func neighbourEntries() string {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var parts []string
	for _, t := range []string{"arp_cache", "ndisc_cache"} {
		data, err := os.ReadFile("/proc/thread-self/net/stat/" + t)
		lines := strings.Split(string(data), "\n")
		if err != nil || len(lines) < 2 {
			continue
		}
		n, _ := strconv.ParseInt(strings.Fields(lines[1] + " 0")[0], 16, 64)
		parts = append(parts, fmt.Sprintf("%s %d", t, n))
	}
	return strings.Join(parts, ", ")
}

func reportPodCost(b *testing.B, key string, o, p podCost) {
	ratio := func(x, y time.Duration) float64 { return float64(x) / float64(y) }
	b.ReportMetric(millis(o.add.cpu()), key+"-cpu/add-ms")
	b.ReportMetric(ratio(o.add.cpu(), p.add.cpu()), key+"-cpu/add-ratio")
	b.ReportMetric(millis(o.del.cpu()), key+"-cpu/del-ms")
	b.ReportMetric(ratio(o.del.cpu(), p.del.cpu()), key+"-cpu/del-ratio")
	b.ReportMetric(millis(o.add.p50()), key+"-add-p50-ms")
	b.ReportMetric(ratio(o.add.p50(), p.add.p50()), key+"-add-p50-ratio")
	b.ReportMetric(millis(o.del.p50()), key+"-del-p50-ms")
	b.ReportMetric(ratio(o.del.p50(), p.del.p50()), key+"-del-p50-ratio")
	b.ReportMetric(millis(quantile(o.b2b, .5)), key+"-b2b-add-p50-ms")
	b.ReportMetric(ratio(quantile(o.b2b, .5), quantile(p.b2b, .5)), key+"-b2b-add-p50-ratio")
}

// podCostTable is every phase's figures and ratios in one log call (a
// benchmark's log is cut after 10 lines unless -v).
func podCostTable(samples int, floor *execFloor, phases []podCostPhase) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "%d samples per phase, interleaved (times in ms); exec of an empty static Go program: %.1f ms CPU (%d runs)\n", samples, millis(floor.perRun()), floor.n)
	// restore: the agent's iptables-restore sessions from the call's start
	// until idle (their commits, the kernel's validation of the table
	// included), almost always within dplane.
	fmt.Fprintf(&sb, "%-26s %-18s %8s %8s %8s %8s %9s %8s %8s %9s %8s %9s %9s %12s %5s\n", "phase", "plugin", "ADD p50", "b2b p50", "DEL p50",
		"CPU/ADD", "(client", "serving", "dplane", "restore)", "CPU/DEL", "(dplane", "restore)", "applies/ADD", "/DEL")
	for _, ph := range phases {
		for _, r := range ph.runs {
			n := time.Duration(max(len(r.add.lat), 1))
			fmt.Fprintf(&sb, "%-26s %-18s %8.1f %8.1f %8.1f %8.1f %9.1f %8.1f %8.1f %9.1f %8.1f %9.1f %9.1f %12.2f %5.2f\n", ph.desc, r.name,
				millis(r.add.p50()), millis(quantile(r.b2b, .5)), millis(r.del.p50()), millis(r.add.cpu()),
				millis(r.add.client/n), millis(r.add.serve/n), millis(r.add.dataplane/n), millis(r.add.restore/n),
				millis(r.del.cpu()), millis(r.del.dataplane/n), millis(r.del.restore/n),
				float64(r.add.applies)/float64(n), float64(r.del.applies)/float64(n))
		}
	}
	for _, ph := range phases {
		for _, o := range ph.runs[:len(ph.runs)-1] {
			p := ph.runs[len(ph.runs)-1]
			fmt.Fprintf(&sb, "%s, %s against %s: ADD p50 %.2fx, back to back %.2fx, DEL p50 %.2fx, CPU per ADD %.2fx, per DEL %.2fx (neighbour entries: %s)\n",
				ph.desc, o.name, p.name, float64(o.add.p50())/float64(p.add.p50()), float64(quantile(o.b2b, .5))/float64(quantile(p.b2b, .5)),
				float64(o.del.p50())/float64(p.del.p50()), float64(o.add.cpu())/float64(p.add.cpu()), float64(o.del.cpu())/float64(p.del.cpu()), ph.neigh)
		}
	}
	lo, hi := phases[0], phases[1]
	o0, o1, p0, p1 := lo.runs[0], hi.runs[0], lo.runs[len(lo.runs)-1], hi.runs[len(hi.runs)-1]
	fmt.Fprintf(&sb, "%s, %s: CPU per ADD %.2fx, per DEL %.2fx of %s's (%.2fx and %.2fx divided by %s's own change between the nodes; %.2fx and %.2fx net of the restore sessions)", hi.desc, o1.name,
		float64(o1.add.cpu())/float64(o0.add.cpu()), float64(o1.del.cpu())/float64(o0.del.cpu()), lo.desc,
		drifted(o1.add.cpu(), o0.add.cpu(), p1.add.cpu(), p0.add.cpu()), drifted(o1.del.cpu(), o0.del.cpu(), p1.del.cpu(), p0.del.cpu()), p0.name,
		float64(o1.add.cpuNetOfRestore())/float64(o0.add.cpuNetOfRestore()), float64(o1.del.cpuNetOfRestore())/float64(o0.del.cpuNetOfRestore()))
	return sb.String()
}

// drifted is ours at the second phase against the first (hi / lo),
// divided by the reference's same ratio (refHi / refLo): the growth that
// is ours, not the machine's speed moving between the phases.
func drifted(hi, lo, refHi, refLo time.Duration) float64 {
	return (float64(hi) / float64(lo)) / (float64(refHi) / float64(refLo))
}
