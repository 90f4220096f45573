package e2e

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/calico-aio/calico-aio/felix/rules"
	"github.com/calico-aio/calico-aio/store/api"
)

// BenchmarkAgentScale: 250 local endpoints and 1,000 policies on one node.
// It reports the time to program everything from scratch (agent start to
// ready), the time from a policy write to its rules being in the kernel
// (p50/p99), the iptables rule count, and the agent's memory.
func BenchmarkAgentScale(b *testing.B) {
	eps, pols := 250, 1000
	if v := os.Getenv("FELIX_BENCH_POLICIES"); v != "" {
		pols, _ = strconv.Atoi(v)
	}
	e := newCNIEnv(b, 30)
	scaleEndpoints(b, e, eps)
	for i := 0; i < pols; i++ {
		p := scalePolicy(fmt.Sprintf("pol-%04d", i), float64(i), i, api.ActionAllow)
		if _, err := e.cl.CreateResource(context.Background(), p); err != nil {
			b.Fatal(err)
		}
	}
	runAgentScale(b, e, fmt.Sprintf("%d endpoints, %d policies", eps, pols), "")
}

// scaleEndpoints creates a pool and eps workload endpoints of node1 whose
// interfaces exist: veth pairs whose "pod" ends stay in the host namespace.
// Labels: app a0..a49, tier t0..t4.
func scaleEndpoints(b *testing.B, e *cniEnv, eps int) {
	b.Helper()
	ctx := context.Background()
	createPool(b, e.cl, "scale", "10.130.0.0/16", 26)
	var batch strings.Builder
	for i := 0; i < eps; i++ {
		fmt.Fprintf(&batch, "link add cali%011d type veth peer name p%d\nlink set cali%011d up\n", i, i, i)
	}
	if err := os.WriteFile(e.state+"/links.batch", []byte(batch.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	mustNS(b, e.host.ns, "ip", "-batch", e.state+"/links.batch")
	wk, _ := api.LookupKind("WorkloadEndpoint")
	for i := 0; i < eps; i++ {
		w := wk.NewObject().(*api.WorkloadEndpoint)
		w.Metadata.Name, w.Metadata.Namespace = fmt.Sprintf("node1-cni-c%d-eth0", i), "default"
		w.Metadata.Labels = map[string]string{"app": fmt.Sprintf("a%d", i%50), "tier": fmt.Sprintf("t%d", i%5)}
		w.Spec = api.WorkloadEndpointSpec{Orchestrator: "cni", Node: "node1", ContainerID: fmt.Sprintf("c%d", i), Endpoint: "eth0",
			InterfaceName: fmt.Sprintf("cali%011d", i), IPNetworks: []string{fmt.Sprintf("10.130.%d.%d/32", i/250, i%250+1)},
			MAC: "ee:ee:ee:00:00:01", Profiles: []string{"scale"}}
		if _, err := e.cl.CreateResource(ctx, w); err != nil {
			b.Fatal(err)
		}
	}
}

// scalePolicy is the i-th policy of a scale run: it selects app a<i%50> and
// acts on TCP to port 1000+i%1000 from tier t<i%5>.
func scalePolicy(name string, order float64, i int, action api.Action) *api.GlobalNetworkPolicy {
	port := api.SinglePort(uint16(1000 + i%1000))
	proto := api.ProtocolFromString("TCP")
	return gnp(name, order, fmt.Sprintf("app == \"a%d\"", i%50),
		[]api.Rule{{Action: action, Protocol: &proto, Source: api.EntityRule{Selector: fmt.Sprintf("tier == \"t%d\"", i%5)},
			Destination: api.EntityRule{Ports: []api.Port{port}}}}, nil)
}

// runAgentScale starts the agent on what the datastore holds, then writes
// 40 probe policies (into tier, "" for the default tier) one at a time and
// waits for each one's chain, and reports the figures. FELIX_BENCH_LOGLEVEL
// sets the agent's log level and FELIX_BENCH_AGENTLOG a file for its log.
// The agent runs with the product's refresh intervals (Calico's: iptables
// 180 s, the others 90 s), as the idle measurement wants.
func runAgentScale(b *testing.B, e *cniEnv, what, tier string) *agentProc {
	ctx := context.Background()
	start := time.Now()
	agent := e.startAgent("node1", "--resync-interval", "0", "--log-level", os.Getenv("FELIX_BENCH_LOGLEVEL"))
	fullProgram := time.Since(start)

	save := mustNS(b, e.host.ns, "iptables-save")
	var rulesTotal, policyRules, endpointRules int
	for _, l := range strings.Split(save, "\n") {
		if !strings.HasPrefix(l, "-A cali-") {
			continue
		}
		rulesTotal++
		switch {
		case strings.HasPrefix(l, "-A cali-pi-"), strings.HasPrefix(l, "-A cali-po-"):
			policyRules++
		case strings.HasPrefix(l, "-A cali-tw-"), strings.HasPrefix(l, "-A cali-fw-"):
			endpointRules++
		}
	}

	// Policy write -> rules in the kernel.
	var lat []time.Duration
	for i := 0; i < 40; i++ {
		name := fmt.Sprintf("probe-%02d", i)
		port := api.SinglePort(uint16(20000 + i))
		proto := api.ProtocolFromString("TCP")
		p := gnp(name, -1, `app == "a0"`, []api.Rule{{Action: api.ActionAllow, Protocol: &proto, Destination: api.EntityRule{Ports: []api.Port{port}}}}, nil)
		p.Spec.Tier = tier
		chain := rules.PolicyChainName(rules.DirIngress, rules.PolicyKey{Name: name})
		t0 := time.Now()
		if _, err := e.cl.CreateResource(ctx, p); err != nil {
			b.Fatal(err)
		}
		for {
			if _, err := inNS(e.host.ns, "iptables", "-w", "-S", chain); err == nil {
				break
			}
			if time.Since(t0) > 10*time.Second {
				b.Fatalf("policy %s not enforced after 10s\n%s", name, agent.logs.String())
			}
			time.Sleep(2 * time.Millisecond)
		}
		lat = append(lat, time.Since(t0))
	}
	if path := os.Getenv("FELIX_BENCH_AGENTLOG"); path != "" { // for profiling with FELIX_BENCH_LOGLEVEL=debug
		if err := os.WriteFile(path, []byte(agent.logs.String()), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	slices.Sort(lat)
	rss := agentRSS(agent)
	b.Logf("%s: full programming %v; policy write -> enforced p50 %.1f ms p99 %.1f ms; %d iptables rules (%d in policy chains, %d in endpoint chains); agent RSS %.1f MB",
		what, fullProgram.Round(time.Millisecond), millis(lat[len(lat)/2]), millis(lat[len(lat)*99/100]), rulesTotal, policyRules, endpointRules, rss)
	b.ReportMetric(millis(fullProgram), "full-program-ms")
	b.ReportMetric(millis(lat[len(lat)/2]), "enforce-p50-ms")
	b.ReportMetric(millis(lat[len(lat)*99/100]), "enforce-p99-ms")
	b.ReportMetric(float64(rulesTotal), "iptables-rules")
	b.ReportMetric(float64(policyRules), "policy-chain-rules")
	b.ReportMetric(float64(endpointRules), "endpoint-chain-rules")
	b.ReportMetric(rss, "agent-rss-MB")
	return agent
}

// idleWindow is how long the idle CPU is measured: FELIX_BENCH_IDLE (a
// duration), 10 minutes when unset, so that every periodic refresh
// (iptables every 180 s, the others every 90 s) falls in it several times.
func idleWindow(b *testing.B) time.Duration {
	v := os.Getenv("FELIX_BENCH_IDLE")
	if v == "" {
		return 10 * time.Minute
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		b.Fatalf("FELIX_BENCH_IDLE=%q: want a positive duration such as 2m", v)
	}
	return d
}

// reportIdleCPU waits until the agent is idle, then measures its CPU (its
// children, iptables-save and ipset, included) over the idle window while
// nothing changes, and reports it as a percentage of one core.
func reportIdleCPU(b *testing.B, agent *agentProc, what string) {
	window := idleWindow(b)
	c0 := agent.settle(b)
	own0, _ := procStat(agent.cmd.Process.Pid)
	t0 := time.Now()
	time.Sleep(window)
	cpu, elapsed := agent.cpu(b)-c0, time.Since(t0)
	own, _ := procStat(agent.cmd.Process.Pid)
	own -= own0
	pct := 100 * cpu.Seconds() / elapsed.Seconds()
	b.Logf("%s: idle agent CPU %v over %v (the agent %v, its children %v): %.3f%% of one core",
		what, cpu, elapsed.Round(time.Second), own, cpu-own, pct)
	b.ReportMetric(pct, "idle-cpu-%")
}

// agentRSS is the agent's resident memory in MB.
func agentRSS(a *agentProc) float64 { return rssMB(a.cmd.Process.Pid) }
