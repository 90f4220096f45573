package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/calico-aio/calico-aio/cni/fastpath"
)

// execCost is the summed rusage of the processes exec'd for one way of
// starting one binary.
type execCost struct {
	cpu, wall time.Duration
	minflt    int64
	n         int
}

func (c execCost) String() string {
	n := time.Duration(max(c.n, 1))
	return fmt.Sprintf("%6.1f ms CPU %6.1f ms wall %6d minor faults", millis(c.cpu/n), millis(c.wall/n), c.minflt/int64(max(c.n, 1)))
}

// execOnce runs bin (under argv[0] name, the way the CNI runtime does)
// with env and stdin and adds its rusage to c.
func (c *execCost) execOnce(bin, name string, env []string, stdin string) error {
	cmd := exec.Command(bin)
	cmd.Args[0] = name
	cmd.Env, cmd.Stdin = env, strings.NewReader(stdin)
	t0 := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s as %s: %w\n%s", bin, name, err, out)
	}
	c.wall += time.Since(t0)
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	c.cpu += rusageCPU(ru)
	c.minflt += ru.Minflt
	c.n++
	return nil
}

// stubAgent answers every fast-path call at once with a canned result,
// as calico-node would for a served call: what the client costs beyond
// the exec, without the agent's work.
func stubAgent(b *testing.B, dir string) {
	l, err := net.Listen("unix", filepath.Join(dir, fastpath.SocketName))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	rep, _ := json.Marshal(fastpath.Reply{Mine: true, Stdout: []byte(`{"cniVersion":"1.0.0"}`)})
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_, _ = io.Copy(io.Discard, c)
			_, _ = c.Write(rep)
			c.Close()
		}
	}()
}

// startupBinaries are the binaries under comparison: the one built for
// this run and, with STARTUP_BENCH_BASELINE (a path, or several separated
// by colons), older builds.
func startupBinaries() []string {
	bins := []string{binary}
	if base := os.Getenv("STARTUP_BENCH_BASELINE"); base != "" {
		bins = append(bins, strings.Split(base, ":")...)
	}
	return bins
}

// execCosts are one binary's figures.
type execCosts struct {
	version, crowded, fast execCost
}

// crowdedHost is a namespace that looks like a node with pods: a default
// route over an uplink, and for each pod a host veth (its peer in another
// namespace) with a /32 route, as the CNI plugin leaves them.
func crowdedHost(b *testing.B, pods int) ns.NetNS {
	host, podsNS := newNS(b), newNS(b)
	mustNS(b, host, "ip", "link", "add", "uplink", "type", "veth", "peer", "name", "uplink", "netns", nsName(podsNS))
	mustNS(b, host, "ip", "addr", "add", "172.30.250.1/24", "dev", "uplink")
	mustNS(b, host, "ip", "link", "set", "uplink", "up")
	mustNS(b, host, "ip", "route", "add", "default", "via", "172.30.250.2", "dev", "uplink", "onlink")
	var hostSide, podSide strings.Builder
	for i := 0; i < pods; i++ {
		fmt.Fprintf(&hostSide, "link add cali%011d type veth peer name p%d netns %s\nlink set cali%011d up\nroute add 10.114.%d.%d/32 dev cali%011d scope link\n",
			i, i, nsName(podsNS), i, i/250, i%250, i)
		fmt.Fprintf(&podSide, "link set p%d up\n", i)
	}
	ipBatch(b, host, hostSide.String())
	ipBatch(b, podsNS, podSide.String()) // carrier up: the host side gets its IPv6 link-local routes
	return host
}

// ipBatch runs `ip -batch` with cmds in namespace n.
func ipBatch(b *testing.B, n ns.NetNS, cmds string) {
	file := filepath.Join(b.TempDir(), "batch")
	if err := os.WriteFile(file, []byte(cmds), 0o644); err != nil {
		b.Fatal(err)
	}
	mustNS(b, n, "ip", "-batch", file)
}

// measureExecs execs each binary n times, interleaved, four ways: as
// calico with CNI_COMMAND=VERSION (the whole start-up: every package init
// and main, no CNI work), the same in a namespace holding 250 pods' host
// links and routes, as calico with an ADD answered by a stub agent (the
// fast path's client), and an empty static Go program (the floor).
func measureExecs(b *testing.B, bins []string, n int, floor string) (costs []execCosts, empty execCost) {
	crowded := crowdedHost(b, 250)
	run := b.TempDir()
	stubAgent(b, run)
	conf := fmt.Sprintf(`{"cniVersion":"1.0.0","name":"s","type":"calico","calico_run_dir":%q}`, run)
	base := []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	versionEnv := append(base, "CNI_COMMAND=VERSION")
	addEnv := append(base, "CNI_COMMAND=ADD", "CNI_CONTAINERID=stub", "CNI_NETNS=/var/run/netns/none", "CNI_IFNAME=eth0")
	costs = make([]execCosts, len(bins))
	for i := 0; i < n; i++ {
		err := empty.execOnce(floor, floor, nil, "")
		for j, bin := range bins {
			c := &costs[j]
			err = errors.Join(err, c.version.execOnce(bin, "calico", versionEnv, conf),
				crowded.Do(func(ns.NetNS) error { return c.crowded.execOnce(bin, "calico", versionEnv, conf) }),
				c.fast.execOnce(bin, "calico", addEnv, conf))
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	return costs, empty
}

// inProcessVariants is our plugin, each baseline binary and ptp +
// host-local, all with no agent running (so ours run in-process).
func inProcessVariants(b *testing.B, e *cniEnv, bins []string) []cniVariant {
	ours := e.conflist("1.0.0", "startup", e.calicoPlugin("node1", ""))
	ptp := e.conflist("1.0.0", "ptp", fmt.Sprintf(`{"type":"ptp","ipam":{"type":"host-local","subnet":"10.112.0.0/16","dataDir":%q}}`, e.state+"/hl"))
	var vs []cniVariant
	for j, bin := range bins {
		cfg := e.cfg
		if j > 0 {
			dir := b.TempDir()
			for _, name := range []string{"calico", "calico-ipam"} {
				if err := os.Symlink(bin, filepath.Join(dir, name)); err != nil {
					b.Fatal(err)
				}
			}
			cfg = libcni.NewCNIConfigWithCacheDir([]string{dir}, e.cache, nil)
		}
		vs = append(vs, cniVariant{fmt.Sprintf("calico #%d in-process", j), fmt.Sprintf("s%d", j), ours, false, cfg})
	}
	return append(vs, cniVariant{"ptp+host-local", "ptp", ptp, false, e.cfg})
}

// BenchmarkCNIStartup prices the start-up of the one binary (issue #25):
// the rusage of exec'ing it with CNI_COMMAND=VERSION (every package init,
// no CNI work) and as a fast-path client answered at once by a stub agent,
// beside an empty static Go program; then in-process ADDs and DELs
// (calico-node stopped: the fallback) interleaved pod by pod with ptp +
// host-local through libcni. STARTUP_BENCH_BASELINE names older builds to
// compare in the same run (colon-separated); STARTUP_BENCH_EXECS and
// STARTUP_BENCH_PODS set the counts (default 100 and 100).
func BenchmarkCNIStartup(b *testing.B) {
	execs, pods := envInt("STARTUP_BENCH_EXECS", 100), envInt("STARTUP_BENCH_PODS", 100)
	bins := startupBinaries()
	floor := newExecFloor(b)
	costs, empty := measureExecs(b, bins, execs, floor.bin)

	e := newCNIEnv(b, 21)
	referencePlugins(b, e.bin)
	createPool(b, e.cl, "startup", "10.113.0.0/16", 26)
	vs := inProcessVariants(b, e, bins)
	warm(b, e, vs)
	runs := measureAll(b, e, vs, pods, 1, nil, floor)

	var sb strings.Builder
	fmt.Fprintf(&sb, "%d execs each, interleaved; empty static Go program: %s\n", execs, empty)
	for j, bin := range bins {
		c := costs[j]
		fmt.Fprintf(&sb, "#%d %s\n  VERSION:             %s\n  VERSION, 250 pods:   %s\n  fast path (stub):    %s\n", j, bin, c.version, c.crowded, c.fast)
	}
	p := runs[len(runs)-1]
	fmt.Fprintf(&sb, "%d pods each, interleaved, no agent:\n", pods)
	for _, r := range runs {
		fmt.Fprintf(&sb, "  %-20s ADD p50 %6.1f ms (%.2fx)  DEL p50 %6.1f ms (%.2fx)  CPU per ADD %6.1f ms (%.2fx)\n", r.name,
			millis(r.p(r.add, .5)), float64(r.p(r.add, .5))/float64(p.p(p.add, .5)),
			millis(r.p(r.del, .5)), float64(r.p(r.del, .5))/float64(p.p(p.del, .5)),
			millis(r.cpuPerAdd), float64(r.cpuPerAdd)/float64(p.cpuPerAdd))
	}
	b.Log(strings.TrimSuffix(sb.String(), "\n"))
	n := time.Duration(execs)
	for j := range bins {
		k := strconv.Itoa(j)
		c := costs[j]
		b.ReportMetric(millis(c.version.cpu/n), "version-cpu-ms-"+k)
		b.ReportMetric(float64(c.version.minflt/int64(execs)), "version-minflt-"+k)
		b.ReportMetric(millis(c.crowded.cpu/n), "version250-cpu-ms-"+k)
		b.ReportMetric(millis(c.fast.cpu/n), "fastpath-cpu-ms-"+k)
		b.ReportMetric(float64(c.fast.minflt/int64(execs)), "fastpath-minflt-"+k)
		r := runs[j]
		b.ReportMetric(float64(r.p(r.add, .5))/float64(p.p(p.add, .5)), "inproc-add-p50-ratio-"+k)
		b.ReportMetric(float64(r.cpuPerAdd)/float64(p.cpuPerAdd), "inproc-cpu-ratio-"+k)
	}
	b.ReportMetric(millis(empty.cpu/n), "exec-floor-cpu-ms")
}

// envInt is the integer in the environment variable name, or def.
func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}
