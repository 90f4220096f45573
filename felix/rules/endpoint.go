package rules

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/calico-aio/calico-aio/iptables"
	"github.com/calico-aio/calico-aio/store/api"
)

// dispatchFanout is how many interfaces a dispatch chain lists before it
// is split by the interface name's next character into sub-chains, so a
// packet passes about fanout + n/fanout rules instead of n.
const dispatchFanout = 16

// endpointChains renders cali-tw-<iface> (to the workload: its ingress
// policy) and cali-fw-<iface> (from the workload: its egress policy).
//
// Verdicts travel in marks. A policy chain that allows a packet sets the
// accept mark and returns; the endpoint chain then returns too and
// cali-FORWARD (or cali-wl-to-host) accepts. Deny drops at once. Pass sets
// the pass mark and returns: the tier's remaining policies are skipped
// (their jumps require the pass mark clear) and so is its end-of-tier
// drop, so the next tier (or the profiles) decides. Log logs and goes on.
func (r *renderer) endpointChains(ep Endpoint) []iptables.Chain {
	c := r.cfg
	clear := rule("", clearMark(c.MarkAccept|c.MarkPass|c.MarkScratch), "Clear marks")
	conntrack := r.conntrackRules()

	// Established packets leave first, before anything else runs (as in
	// Calico); the marks matter only to the policy rules after the clear.
	// QoS limits (qos.go) run around the conntrack rules, as in Calico.
	q := ep.QoS
	if q == nil {
		q = &api.QoSControls{}
	}
	tw := iptables.Chain{Name: EndpointChainName("tw", ep.Iface), Rules: slices.Concat(
		r.qosPacketRate("ingress", q.IngressPacketRate, q.IngressPacketBurst), conntrack,
		r.qosConnections("ingress", q.IngressMaxConnections), []iptables.Rule{clear})}
	tw.Rules = append(tw.Rules, r.verdictRules(DirIngress, ep.tiers(DirIngress), ep.Profiles)...)

	fw := iptables.Chain{Name: EndpointChainName("fw", ep.Iface), Rules: slices.Concat(r.antiSpoof(ep),
		r.qosPacketRate("egress", q.EgressPacketRate, q.EgressPacketBurst), r.qosEgressBandwidth(ep.Iface, q), conntrack,
		r.qosConnections("egress", q.EgressMaxConnections), []iptables.Rule{clear})}
	// Workloads may not send encapsulated packets (Calico's defaults),
	// unless FelixConfiguration allows them.
	if !c.AllowVXLANPacketsFromWorkloads {
		port := c.VXLANPort
		if port == 0 {
			port = 4789
		}
		// multiport, not "-m udp --dport": iptables resolves a --dport
		// through getaddrinfo, whose address check dumps every address
		// of the namespace (each pod's veth has one) in every restore
		// that adds an endpoint; multiport parses the number.
		fw.Rules = append(fw.Rules, rule(fmt.Sprintf("-p udp -m multiport --dports %d", port), c.filterDeny(), c.denyWord()+" VXLAN encapped packets originating in workloads"))
	}
	if c.IPVersion == 4 && !c.AllowIPIPPacketsFromWorkloads {
		fw.Rules = append(fw.Rules, rule("-p 4", c.filterDeny(), c.denyWord()+" IPinIP encapped packets originating in workloads"))
	}
	fw.Rules = append(fw.Rules, r.verdictRules(DirEgress, ep.tiers(DirEgress), ep.Profiles)...)
	return []iptables.Chain{tw, fw}
}

// verdictRules runs the tiers in order, then the profiles, as Calico
// does. Each tier starts with the pass mark clear and jumps to its
// policies in order while the pass mark stays clear; an accept returns at
// once. At its end a Deny tier drops what no policy passed; after a Pass
// (by rule or a Pass defaultAction) the next tier, and after the last tier
// the profiles, decide.
func (r *renderer) verdictRules(dir string, tiers []Tier, profiles []string) []iptables.Rule {
	out := r.tierRules(dir, tiers, true)
	acc := r.cfg.MarkAccept
	for _, p := range profiles {
		out = append(out,
			rule("", "-j "+ProfileChainName(dir, p), ""),
			rule(markSet(acc), "-j RETURN", "Return if profile accepted"))
	}
	return append(out, rule("", r.cfg.filterDeny(), r.cfg.denyWord()+" if no profiles matched"))
}

// conntrackRules accept the packets of established flows and, unless
// DisableConntrackInvalid, deny those conntrack calls invalid.
func (r *renderer) conntrackRules() []iptables.Rule {
	out := []iptables.Rule{rule("-m conntrack --ctstate RELATED,ESTABLISHED", "-j ACCEPT", "")}
	if !r.cfg.DisableConntrackInvalid {
		out = append(out, rule("-m conntrack --ctstate INVALID", r.cfg.filterDeny(), ""))
	}
	return out
}

// tierRules runs the tiers in order: each starts with the pass mark clear
// and jumps to its policies in order while the pass mark stays clear; an
// accept returns at once. With endOfTier, a tier whose defaultAction is not
// Pass drops what no policy passed.
func (r *renderer) tierRules(dir string, tiers []Tier, endOfTier bool) []iptables.Rule {
	acc, pass := r.cfg.MarkAccept, r.cfg.MarkPass
	var out []iptables.Rule
	for _, t := range tiers {
		if len(t.Policies) == 0 {
			continue
		}
		out = append(out, rule("", clearMark(pass), "Start of tier "+t.Name))
		for _, k := range t.Policies {
			out = append(out,
				rule(markClear(pass), "-j "+r.policyChain(dir, k), ""),
				rule(markSet(acc), "-j RETURN", "Return if policy accepted"))
		}
		if endOfTier && t.DefaultAction != api.ActionPass {
			out = append(out, rule(markClear(pass), r.cfg.filterDeny(), "End of tier "+t.Name+". "+r.cfg.denyWord()+" if no policies passed packet"))
		}
	}
	return out
}

// antiSpoof drops packets from the workload whose source is none of its
// addresses (of this IP version) nor in AllowSpoofedFrom. It runs before
// conntrack so that a spoofed packet cannot ride on another flow's state.
func (r *renderer) antiSpoof(ep Endpoint) []iptables.Rule {
	const why = "Drop packets from unexpected source addresses"
	v4 := r.cfg.IPVersion == 4
	var allowed []string
	add := func(p netip.Prefix) {
		if p.IsValid() && p.Addr().Is4() == v4 {
			allowed = append(allowed, p.Masked().String())
		}
	}
	for _, a := range ep.Addrs {
		add(netip.PrefixFrom(a, a.BitLen()))
	}
	for _, p := range ep.AllowSpoofedFrom {
		add(p)
	}
	slices.Sort(allowed)
	allowed = slices.Compact(allowed)
	switch len(allowed) {
	case 0:
		return []iptables.Rule{rule("", "-j DROP", "Drop: the workload has no address of this IP version")}
	case 1:
		return []iptables.Rule{rule("! -s "+allowed[0], "-j DROP", why)}
	}
	s := r.cfg.MarkScratch
	out := []iptables.Rule{rule("", clearMark(s), "")} // it runs before the chain's "Clear marks"
	for _, p := range allowed {
		out = append(out, rule("-s "+p, setMark(s), ""))
	}
	return append(out, rule(markClear(s), "-j DROP", why), rule("", clearMark(s), ""))
}

// dispatchChains renders cali-from-wl-dispatch and cali-to-wl-dispatch.
func (r *renderer) dispatchChains(eps []Endpoint) []iptables.Chain {
	ifaces := make([]string, len(eps))
	for i, ep := range eps {
		ifaces[i] = ep.Iface
	}
	from := r.dispatch(ChainFromWlDispatch, "-i", ifaces, func(i string) string { return EndpointChainName("fw", i) })
	to := r.dispatch(ChainToWlDispatch, "-o", ifaces, func(i string) string { return EndpointChainName("tw", i) })
	return append(from, to...)
}

// dispatch sends each interface (sorted) to its chain with a goto, so the
// endpoint chain's RETURN goes back to the dispatch chain's caller; any
// other interface is dropped. Above dispatchFanout interfaces, those
// sharing the character after the workload prefix go through a sub-chain
// "<root>-<char>". A chain whose lines equal those of the last Render is
// taken from the memo, so a pod added to a full node renders its own
// sub-chain and the top one.
func (r *renderer) dispatch(root, flag string, ifaces []string, target func(string) string) []iptables.Chain {
	groupOf := func(iface string) string {
		prefix := r.cfg.workloadPrefixOf(iface)
		if len(ifaces) <= dispatchFanout || prefix == "" || len(iface) <= len(prefix)+1 {
			return ""
		}
		ch := iface[len(prefix)]
		if ch >= '0' && ch <= '9' || ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' {
			return iface[:len(prefix)+1] // prefix and the character, without a copy
		}
		return ""
	}
	count := map[string]int{}
	for _, i := range ifaces {
		count[groupOf(i)]++
	}
	first := r.cfg.workloadPrefixes()[0]
	// Each chain as its lines: an interface, or groupMark + a group for
	// the jump to that group's sub-chain.
	top := dispatchLines{name: root}
	var subs []dispatchLines
	for _, i := range ifaces {
		g := groupOf(i)
		if g == "" || count[g] == 1 {
			top.lines = append(top.lines, i)
			continue
		}
		if len(subs) == 0 || subs[len(subs)-1].group != g {
			name := subDispatchName(root, first, g)
			top.lines = append(top.lines, groupMark+g)
			subs = append(subs, dispatchLines{name: name, group: g})
		}
		subs[len(subs)-1].lines = append(subs[len(subs)-1].lines, i)
	}
	render := func(d dispatchLines) iptables.Chain {
		c := iptables.Chain{Name: d.name, Rules: make([]iptables.Rule, 0, len(d.lines)+1)}
		for _, l := range d.lines {
			if g, ok := strings.CutPrefix(l, groupMark); ok {
				c.Rules = append(c.Rules, rule(flag+" "+g+"+", "-g "+subDispatchName(root, first, g), ""))
				continue
			}
			c.Rules = append(c.Rules, rule(flag+" "+l, "-g "+target(l), ""))
		}
		c.Rules = append(c.Rules, rule("", r.cfg.filterDeny(), "Unknown interface"))
		return c
	}
	out := []iptables.Chain{r.memo.dispatchChain(top, render)}
	for _, d := range subs {
		out = append(out, r.memo.dispatchChain(d, render))
	}
	return out
}

// groupMark starts a dispatch line that stands for a group's sub-chain (an
// interface name cannot hold a NUL).
const groupMark = "\x00"

// dispatchLines is a dispatch chain before rendering: its name and lines.
type dispatchLines struct {
	name, group string
	lines       []string
}

// subDispatchName is a group's chain: "<root>-<char>" for the first
// workload prefix (first), "<root>-<prefix><char>" for the others.
func subDispatchName(root, first, group string) string {
	return root + "-" + strings.TrimPrefix(group, first)
}

// tiers is the endpoint's tiers of one direction (DirIngress, DirEgress).
func (ep *Endpoint) tiers(dir string) []Tier {
	ts, pols := ep.IngressTiers, ep.IngressPolicies
	if dir == DirEgress {
		ts, pols = ep.EgressTiers, ep.EgressPolicies
	}
	if len(ts) > 0 || len(pols) == 0 {
		return ts
	}
	return []Tier{{Name: api.DefaultTierName, DefaultAction: api.ActionDeny, Policies: pols}}
}
