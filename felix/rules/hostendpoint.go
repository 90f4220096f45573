package rules

import (
	"github.com/calico-aio/calico-aio/iptables"
)

// AllInterfaces is the interface of a host endpoint with interfaceName
// "*": every host interface that has no host endpoint of its own (not the
// workload interfaces, and not lo).
const AllInterfaces = "*"

// allInterfacesName stands for "*" in chain names, as Calico names it.
const allInterfacesName = "any-interface-at-all"

// HostEndpoint is a host endpoint of this node resolved to one interface,
// with the policies that apply to it by kind, each kind's tiers in order.
//
//   - Ingress/EgressTiers: normal policies, traffic to (ingress) and from
//     (egress) the host itself via the interface: filter INPUT/OUTPUT,
//     then the profiles, then a default drop.
//   - ForwardIngress/ForwardEgressTiers: applyOnForward normal policies,
//     traffic forwarded in (ingress) or out (egress) via the interface:
//     filter FORWARD. No such policy: forwarded traffic is not policed.
//   - PreDNATTiers: preDNAT policies (ingress only): mangle PREROUTING,
//     before DNAT, for all traffic arriving on the interface. No default
//     drop: what they do not decide goes on to the other policies.
//   - UntrackedIngress/UntrackedEgressTiers: doNotTrack policies: raw
//     PREROUTING/OUTPUT; what they allow is not tracked and skips every
//     later policy; no default drop. Ignored for "*", as in Calico.
//
// The ingress policy of a "*" endpoint also polices traffic from local
// workloads to the host, after their egress policy, unless
// DefaultEndpointToHostAction drops it anyway.
//
// Failsafe ports are accepted ahead of every one of these.
type HostEndpoint struct {
	Name                                        string // the HostEndpoint's name, for comments
	Iface                                       string // interface name or AllInterfaces
	IngressTiers, EgressTiers                   []Tier
	ForwardIngressTiers, ForwardEgressTiers     []Tier
	PreDNATTiers                                []Tier
	UntrackedIngressTiers, UntrackedEgressTiers []Tier
	Profiles                                    []string
}

// Chain name prefixes of host endpoints, as Calico names them: from (fh:
// ingress) and to (th: egress) the host endpoint, and their forward
// variants. The raw and mangle tables use the fh/th names too.
const (
	fromHostPrefix        = "cali-fh-"
	toHostPrefix          = "cali-th-"
	fromHostFwdPrefix     = "cali-fhfw-"
	toHostFwdPrefix       = "cali-thfw-"
	ChainFromHostEP       = "cali-from-host-endpoint"
	ChainToHostEP         = "cali-to-host-endpoint"
	ChainFromHostEPFwd    = "cali-from-hep-forward"
	ChainToHostEPFwd      = "cali-to-hep-forward"
	ChainRawPrerouting    = "cali-PREROUTING"
	ChainRawOutput        = "cali-OUTPUT"
	ChainManglePrerouting = "cali-PREROUTING"
)

// HostEndpointChainName is the chain of a host endpoint's interface for
// one of the prefixes "fh", "th", "fhfw", "thfw".
func HostEndpointChainName(kind, iface string) string {
	if iface == AllInterfaces {
		iface = allInterfacesName
	}
	prefix := map[string]string{"fh": fromHostPrefix, "th": toHostPrefix, "fhfw": fromHostFwdPrefix, "thfw": toHostFwdPrefix}[kind]
	return limitedName(prefix, iface)
}

// hepTable says which table a host endpoint chain is rendered for.
type hepTable int

const (
	hepFilter hepTable = iota
	hepForward
	hepMangle
	hepRaw
)

// sortedHostEndpoints orders host endpoints by interface ("*" last); of
// several on one interface the first given wins.
func sortedHostEndpoints(in []HostEndpoint) []HostEndpoint {
	var out, wild []HostEndpoint
	seen := map[string]bool{}
	for _, h := range in {
		if h.Iface == "" || seen[h.Iface] {
			continue
		}
		seen[h.Iface] = true
		if h.Iface == AllInterfaces {
			wild = append(wild, h)
		} else {
			out = append(out, h)
		}
	}
	sortByIface(out)
	return append(out, wild...)
}

func sortByIface(hs []HostEndpoint) {
	for i := 1; i < len(hs); i++ {
		for j := i; j > 0 && hs[j].Iface < hs[j-1].Iface; j-- {
			hs[j], hs[j-1] = hs[j-1], hs[j]
		}
	}
}

// hepDispatch sends each host endpoint's interface to its chain (goto, so
// the chain's RETURN goes back to the caller); workload interfaces and
// interfaces without a host endpoint return unpoliced. A "*" endpoint
// takes every other interface but lo.
func (r *renderer) hepDispatch(name, flag, kind string, heps []HostEndpoint, want func(HostEndpoint) bool) iptables.Chain {
	ch := iptables.Chain{Name: name}
	for _, m := range r.cfg.workloadMatches(flag) {
		ch.Rules = append(ch.Rules, rule(m, "-j RETURN", "Workload traffic is policed by workload policy"))
	}
	for _, h := range heps {
		if !want(h) {
			continue
		}
		target := "-g " + HostEndpointChainName(kind, h.Iface)
		if h.Iface == AllInterfaces {
			ch.Rules = append(ch.Rules, rule(flag+" lo", "-j RETURN", "Loopback is not policed by a * host endpoint"))
			for _, x := range r.cfg.ExcludeIfaces {
				ch.Rules = append(ch.Rules, rule(flag+" "+x, "-j RETURN", "Excluded interface (interfaceExclude)"))
			}
			ch.Rules = append(ch.Rules, rule("", target, ""))
			continue
		}
		ch.Rules = append(ch.Rules, rule(flag+" "+h.Iface, target, ""))
	}
	return ch
}

// failsafeJump jumps to a failsafe chain when it has rules.
func failsafeJump(name string, present map[string]bool) []iptables.Rule {
	if !present[name] {
		return nil
	}
	return []iptables.Rule{rule("", "-j "+name, "Failsafe ports")}
}

// hepChain renders one host endpoint chain.
func (r *renderer) hepChain(name, dir string, table hepTable, tiers []Tier, profiles []string, failsafe []iptables.Rule) iptables.Chain {
	c := r.cfg
	ch := iptables.Chain{Name: name, Rules: []iptables.Rule{rule("", clearMark(c.MarkAccept|c.MarkPass|c.MarkScratch), "Clear marks")}}
	if table == hepFilter || table == hepForward {
		ch.Rules = append(ch.Rules, r.conntrackRules()...)
	}
	ch.Rules = append(ch.Rules, failsafe...)
	switch table {
	case hepFilter:
		ch.Rules = append(ch.Rules, r.verdictRules(dir, tiers, profiles)...)
	case hepForward:
		ch.Rules = append(ch.Rules, r.verdictRules(dir, tiers, nil)...)
	default:
		// Pre-DNAT and untracked policy: no end-of-tier drop, no profiles,
		// no default drop, as Calico renders them: what they leave
		// undecided goes on to the later policies.
		ch.Rules = append(ch.Rules, r.tierRules(dir, tiers, false)...)
	}
	return ch
}

// hostFilterChains renders the filter chains of the host endpoints: the
// dispatch chains and per interface cali-fh-/cali-th- (to and from the
// host) and, where applyOnForward policies apply, cali-fhfw-/cali-thfw-.
func (r *renderer) hostFilterChains(heps []HostEndpoint, present map[string]bool) []iptables.Chain {
	all := func(HostEndpoint) bool { return true }
	fwdIn := func(h HostEndpoint) bool { return hasPolicies(h.ForwardIngressTiers) }
	fwdOut := func(h HostEndpoint) bool { return hasPolicies(h.ForwardEgressTiers) }
	out := []iptables.Chain{
		r.hepDispatch(ChainFromHostEP, "-i", "fh", heps, all),
		r.hepDispatch(ChainToHostEP, "-o", "th", heps, all),
		r.hepDispatch(ChainFromHostEPFwd, "-i", "fhfw", heps, fwdIn),
		r.hepDispatch(ChainToHostEPFwd, "-o", "thfw", heps, fwdOut),
	}
	for _, h := range heps {
		out = append(out,
			r.hepChain(HostEndpointChainName("fh", h.Iface), DirIngress, hepFilter, h.IngressTiers, h.Profiles, failsafeJump(ChainFailsafeIn, present)),
			r.hepChain(HostEndpointChainName("th", h.Iface), DirEgress, hepFilter, h.EgressTiers, h.Profiles, failsafeJump(ChainFailsafeOut, present)))
		if fwdIn(h) {
			out = append(out, r.hepChain(HostEndpointChainName("fhfw", h.Iface), DirIngress, hepForward, h.ForwardIngressTiers, nil, nil))
		}
		if fwdOut(h) {
			out = append(out, r.hepChain(HostEndpointChainName("thfw", h.Iface), DirEgress, hepForward, h.ForwardEgressTiers, nil, nil))
		}
	}
	return out
}

// hostRawChains renders the raw table: untracked (doNotTrack) policy of
// the host endpoints. An allowed packet is marked, not tracked, and
// accepted; the filter table accepts it on the mark.
func (r *renderer) hostRawChains(heps []HostEndpoint) []iptables.Chain {
	c := r.cfg
	ours := c.MarkAccept | c.MarkPass | c.MarkScratch
	in := r.failsafe(ChainFailsafeIn, c.FailsafeInbound, "-s")
	in.Rules = append(in.Rules, r.failsafeReplies(c.FailsafeOutbound, "-s")...)
	out := r.failsafe(ChainFailsafeOut, c.FailsafeOutbound, "-d")
	out.Rules = append(out.Rules, r.failsafeReplies(c.FailsafeInbound, "-d")...)
	present := map[string]bool{ChainFailsafeIn: len(in.Rules) > 0, ChainFailsafeOut: len(out.Rules) > 0}
	top := func(name, dispatch string) iptables.Chain {
		return iptables.Chain{Name: name, Rules: []iptables.Rule{
			rule("", clearMark(ours), "Clear our marks"),
			rule("", "-j "+dispatch, ""),
			rule(markSet(c.MarkAccept), "-j NOTRACK", "Untracked policy allowed the packet: do not track it"),
			rule(markSet(c.MarkAccept), "-j ACCEPT", ""),
		}}
	}
	// As in Calico, "*" host endpoints do not support untracked policy.
	ingress := func(h HostEndpoint) bool { return h.Iface != AllInterfaces && hasPolicies(h.UntrackedIngressTiers) }
	egress := func(h HostEndpoint) bool { return h.Iface != AllInterfaces && hasPolicies(h.UntrackedEgressTiers) }
	chains := []iptables.Chain{
		top(ChainRawPrerouting, ChainFromHostEP), top(ChainRawOutput, ChainToHostEP),
		r.hepDispatch(ChainFromHostEP, "-i", "fh", heps, ingress),
		r.hepDispatch(ChainToHostEP, "-o", "th", heps, egress),
	}
	for _, h := range heps {
		if ingress(h) {
			chains = append(chains, r.hepChain(HostEndpointChainName("fh", h.Iface), DirIngress, hepRaw, h.UntrackedIngressTiers, nil, failsafeJump(ChainFailsafeIn, present)))
		}
		if egress(h) {
			chains = append(chains, r.hepChain(HostEndpointChainName("th", h.Iface), DirEgress, hepRaw, h.UntrackedEgressTiers, nil, failsafeJump(ChainFailsafeOut, present)))
		}
	}
	for _, fs := range []iptables.Chain{in, out} {
		if len(fs.Rules) > 0 {
			chains = append(chains, fs)
		}
	}
	return chains
}

// hostMangleChains renders the mangle table: pre-DNAT policy of the host
// endpoints, for new flows arriving on them. An allowed packet is marked
// and accepted; the filter table accepts it on the mark.
func (r *renderer) hostMangleChains(heps []HostEndpoint) []iptables.Chain {
	c := r.cfg
	ours := c.MarkAccept | c.MarkPass | c.MarkScratch
	in := r.failsafe(ChainFailsafeIn, c.FailsafeInbound, "-s")
	present := map[string]bool{ChainFailsafeIn: len(in.Rules) > 0}
	ingress := func(h HostEndpoint) bool { return hasPolicies(h.PreDNATTiers) }
	chains := []iptables.Chain{
		{Name: ChainManglePrerouting, Rules: []iptables.Rule{
			rule(markSet(c.MarkAccept), c.mangleAllow(), "Untracked policy allowed the packet"),
			rule("-m conntrack --ctstate RELATED,ESTABLISHED", "-j ACCEPT", "Pre-DNAT policy polices new flows only"),
			rule("", clearMark(ours), "Clear our marks"),
			rule("", "-j "+ChainFromHostEP, ""),
			rule(markSet(c.MarkAccept), c.mangleAllow(), "Pre-DNAT policy allowed the packet"),
		}},
		r.hepDispatch(ChainFromHostEP, "-i", "fh", heps, ingress),
	}
	if last := heps[len(heps)-1]; last.Iface == AllInterfaces && ingress(last) {
		// The pre-DNAT policy of a "*" endpoint sees traffic from every
		// interface, workload interfaces included (node ports and cluster
		// IPs reached from pods), as Calico's maintainers describe it.
		chains[1].Rules = chains[1].Rules[1:]
	}
	for _, h := range heps {
		if ingress(h) {
			chains = append(chains, r.hepChain(HostEndpointChainName("fh", h.Iface), DirIngress, hepMangle, h.PreDNATTiers, nil, failsafeJump(ChainFailsafeIn, present)))
		}
	}
	if len(in.Rules) > 0 {
		chains = append(chains, in)
	}
	return chains
}

// failsafeReplies accepts the replies of failsafe flows in the raw table,
// where there is no connection tracking yet: packets from (netFlag "-s")
// or to ("-d") a failsafe port of the other direction.
func (r *renderer) failsafeReplies(ports []ProtoPort, netFlag string) []iptables.Rule {
	ch := r.failsafe("", ports, netFlag)
	for i := range ch.Rules {
		ch.Rules[i].Match = replaceWord(ch.Rules[i].Match, "--dport", "--sport")
	}
	return ch.Rules
}

func replaceWord(s, old, repl string) string {
	for i := 0; i+len(old) <= len(s); i++ {
		if s[i:i+len(old)] == old {
			return s[:i] + repl + s[i+len(old):]
		}
	}
	return s
}

func hasPolicies(ts []Tier) bool {
	for _, t := range ts {
		if len(t.Policies) > 0 {
			return true
		}
	}
	return false
}
