package iptables

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/calico-aio/calico-aio/internal/nstest"
	"github.com/calico-aio/calico-aio/internal/proccpu"
)

// endpointTable is a filter table in Calico's workload layout (the shape
// of felix/rules/testdata/v4.golden) with n endpoints on one profile:
// cali-FORWARD sends workload traffic to the two dispatch chains, each
// split into 16 sub-chains by the interface name's first character after
// "cali" as the agent splits them (felix/rules/endpoint.go), and
// cali-INPUT to cali-wl-to-host, which (when inputWalk) jumps to the
// from-workload dispatch too, as Calico's does.
func endpointTable(n int, inputWalk bool) []Chain {
	iface := func(i int) string { return fmt.Sprintf("cali%x%010d", i%16, i) }
	fwd := Chain{Name: "cali-FORWARD", Rules: []Rule{
		{Match: "-m mark ! --mark 0x0/0x70000", Action: "-j MARK --set-xmark 0x0/0x70000"},
		{Match: "-i cali+", Action: "-j cali-from-wl-dispatch"},
		{Match: "-o cali+", Action: "-j cali-to-wl-dispatch"},
		{Match: "-m mark --mark 0x10000/0x10000", Action: "-j ACCEPT"},
	}}
	input := Chain{Name: "cali-INPUT", Rules: []Rule{{Match: "-i cali+", Action: "-g cali-wl-to-host"}}}
	toHost := Chain{Name: "cali-wl-to-host", Rules: []Rule{{Match: "-d 127.0.0.0/8 -m conntrack ! --ctstate DNAT", Action: "-j DROP"}}}
	if inputWalk {
		toHost.Rules = append(toHost.Rules, Rule{Action: "-j cali-from-wl-dispatch"})
	}
	toHost.Rules = append(toHost.Rules, Rule{Action: "-j DROP"})
	from, to := Chain{Name: "cali-from-wl-dispatch"}, Chain{Name: "cali-to-wl-dispatch"}
	fromSub, toSub := make([]Chain, 16), make([]Chain, 16)
	for g := range 16 {
		fromSub[g].Name, toSub[g].Name = fmt.Sprintf("cali-from-wl-dispatch-%x", g), fmt.Sprintf("cali-to-wl-dispatch-%x", g)
		from.Rules = append(from.Rules, Rule{Match: fmt.Sprintf("-i cali%x+", g), Action: "-g " + fromSub[g].Name})
		to.Rules = append(to.Rules, Rule{Match: fmt.Sprintf("-o cali%x+", g), Action: "-g " + toSub[g].Name})
	}
	profiles := []Chain{
		{Name: "cali-pri-kns.bench", Rules: []Rule{{Action: "-j MARK --set-xmark 0x10000/0x10000"}, {Match: "-m mark --mark 0x10000/0x10000", Action: "-j RETURN"}}},
		{Name: "cali-pro-kns.bench", Rules: []Rule{{Action: "-j MARK --set-xmark 0x10000/0x10000"}, {Match: "-m mark --mark 0x10000/0x10000", Action: "-j RETURN"}}},
	}
	var eps []Chain
	for i := range n {
		name := iface(i)
		fromSub[i%16].Rules = append(fromSub[i%16].Rules, Rule{Match: "-i " + name, Action: "-g cali-fw-" + name})
		toSub[i%16].Rules = append(toSub[i%16].Rules, Rule{Match: "-o " + name, Action: "-g cali-tw-" + name})
		eps = append(eps, Chain{Name: "cali-tw-" + name, Rules: []Rule{
			{Match: "-m conntrack --ctstate RELATED,ESTABLISHED", Action: "-j ACCEPT"},
			{Match: "-m conntrack --ctstate INVALID", Action: "-j DROP"},
			{Action: "-j MARK --set-xmark 0x0/0x70000"},
			{Action: "-j cali-pri-kns.bench"},
			{Match: "-m mark --mark 0x10000/0x10000", Action: "-j RETURN"},
			{Action: "-j DROP"},
		}}, Chain{Name: "cali-fw-" + name, Rules: []Rule{
			{Match: fmt.Sprintf("! -s 10.65.%d.%d/32", i/250, i%250), Action: "-j DROP"},
			{Match: "-m conntrack --ctstate RELATED,ESTABLISHED", Action: "-j ACCEPT"},
			{Match: "-m conntrack --ctstate INVALID", Action: "-j DROP"},
			{Action: "-j MARK --set-xmark 0x0/0x70000"},
			{Match: "-p udp -m multiport --dports 4789", Action: "-j DROP"},
			{Match: "-p 4", Action: "-j DROP"},
			{Action: "-j cali-pro-kns.bench"},
			{Match: "-m mark --mark 0x10000/0x10000", Action: "-j RETURN"},
			{Action: "-j DROP"},
		}})
	}
	for g := range 16 {
		fromSub[g].Rules = append(fromSub[g].Rules, Rule{Action: "-j DROP"})
		toSub[g].Rules = append(toSub[g].Rules, Rule{Action: "-j DROP"})
	}
	from.Rules = append(from.Rules, Rule{Action: "-j DROP"})
	to.Rules = append(to.Rules, Rule{Action: "-j DROP"})
	chains := append([]Chain{fwd, input, toHost, from, to}, fromSub...)
	return append(append(append(chains, toSub...), profiles...), eps...)
}

// BenchmarkEndpointCommit prices what adding one endpoint's chains costs
// in the kernel as the node fills: in a network namespace, a filter table
// in Calico's workload layout with 10 and with 250 endpoints, then one
// more endpoint added (its two chains, its two dispatch rules in their
// sub-chains: the restore an ADD makes) and taken away again (outside the
// timing), through one long-lived iptables-restore as the agent runs it.
// On the nf_tables backend the commit validates every path from the base
// chains, so the cost follows the table's size; "no-input-walk" is the
// same table without cali-wl-to-host's jump to the from-workload dispatch,
// which makes the kernel walk every cali-fw- chain a second time.
// restore-cpu-ns/op is the restore session's CPU (user + system, in 10 ms
// ticks: run many), the kernel's validation included; self-cpu-ns/op the
// benchmark process's own (rendering, writing, waiting for the commit).
func BenchmarkEndpointCommit(b *testing.B) {
	nstest.NeedKernel(b, "iptables-save", "iptables-restore")
	for _, layout := range []struct {
		name      string
		inputWalk bool
	}{{"calico", true}, {"no-input-walk", false}} {
		for _, n := range []int{10, 250} {
			b.Run(fmt.Sprintf("%s-%d", layout.name, n), func(b *testing.B) {
				ns := nstest.NewNS(b)
				sessions := NewSessions() // one long-lived iptables-restore, as the agent runs it
				b.Cleanup(sessions.Close)
				tb := NewTable("filter", 4, TableOptions{Hooks: map[string]string{"FORWARD": "cali-FORWARD", "INPUT": "cali-INPUT"}, Sessions: sessions})
				without, with := endpointTable(n, layout.inputWalk), endpointTable(n+1, layout.inputWalk)
				tb.SetChains(without)
				applyIn(b, ns, tb)
				var cpu, self time.Duration
				for b.Loop() {
					b.StopTimer()
					tb.SetChains(without)
					applyIn(b, ns, tb)
					before, selfBefore := restoreCPU(b), proccpu.MustSelf(b)
					b.StartTimer()
					tb.SetChains(with)
					if st := applyIn(b, ns, tb); st.ChainsCreated != 2 {
						b.Fatalf("stats %+v, want the endpoint's two chains created", st)
					}
					b.StopTimer()
					cpu += restoreCPU(b) - before
					self += proccpu.MustSelf(b) - selfBefore
					b.StartTimer()
				}
				b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "restore-cpu-ns/op")
				b.ReportMetric(float64(self.Nanoseconds())/float64(b.N), "self-cpu-ns/op")
			})
		}
	}
}

// restoreCPU is the CPU of this process's children so far: the restore
// session and any command run and reaped.
func restoreCPU(tb testing.TB) time.Duration {
	cpu, err := proccpu.Descendants(os.Getpid())
	if err != nil {
		tb.Fatal(err)
	}
	return cpu
}
