package rules

import (
	"cmp"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/calico-aio/calico-aio/iptables"
	"github.com/calico-aio/calico-aio/store/api"
)

// Render turns the local endpoints with their policies and profiles into
// our chains for one IP version, and lists the IP sets the rules use
// (sorted by name). It is pure and deterministic: the same Input gives
// identical Tables, whatever the order of its maps.
//
// Chain layout (filter):
//
//	cali-FORWARD          clear our marks; -i cali+ -> cali-from-wl-dispatch;
//	                      -o cali+ -> cali-to-wl-dispatch; ACCEPT if the accept mark is set
//	cali-INPUT            -i cali+ goto cali-wl-to-host; other traffic -> cali-failsafe-in
//	cali-wl-to-host       (IPv4: 127.0.0.0/8 dropped unless DNATed; IPv6: NDP/MLD accepted)
//	                      -> cali-from-wl-dispatch; DefaultEndpointToHostAction
//	cali-OUTPUT           -o cali+ RETURN (host-to-workload traffic is not policed, as in
//	                      Calico); other traffic -> cali-failsafe-out
//	cali-from-wl-dispatch per interface goto cali-fw-<iface>, else DROP (split by the
//	cali-to-wl-dispatch   interface's next character above 16 endpoints)
//	cali-fw-<iface>       workload egress: anti-spoofing, conntrack, marks, encap drops, policies, profiles
//	cali-tw-<iface>       workload ingress: conntrack, marks, policies tier by tier, profiles
//	cali-pi-/cali-po-     one chain per policy and direction in use
//	cali-pri-/cali-pro-   one chain per profile and direction in use
//
// With host endpoints (hostendpoint.go) cali-INPUT/cali-OUTPUT dispatch
// host traffic to cali-fh-<iface>/cali-th-<iface> (failsafe ports, normal
// policy, profiles, default drop), cali-FORWARD to cali-fhfw-/cali-thfw-
// (applyOnForward policy), mangle cali-PREROUTING to cali-fh- (pre-DNAT
// policy) and raw cali-PREROUTING/cali-OUTPUT to cali-fh-/cali-th-
// (doNotTrack policy), each behind the failsafe ports.
//
// Anti-spoofing is done in cali-fw-<iface> (source must be one of the
// endpoint's addresses or AllowSpoofedFrom), not with rpfilter in raw, so
// it does not depend on routes and is covered by these tests; raw and
// mangle stay empty without host endpoints.
func Render(cfg Config, in Input) (Tables, []IPSetSpec) {
	r := &renderer{cfg: cfg.withDefaults(), sets: map[string]IPSetSpec{}, names: map[IPSetSpec]string{},
		policyNames: map[policyUse]string{}, memo: in.Memo}
	eps := sortedEndpoints(in.Endpoints)
	heps := sortedHostEndpoints(in.HostEndpoints)
	if len(heps) > 0 {
		r.cfg.HostEndpoints = true
		r.wildcardHEP = heps[len(heps)-1].Iface == AllInterfaces
	}
	var t Tables
	filter, present := r.filterStatic(len(heps) > 0)
	static := r.withIPVS(filter, eps, heps) // kube-proxy IPVS mode (ipvs.go)
	in.Memo.begin(r.cfg)
	defer in.Memo.end()
	dispatch := r.dispatchChains(eps)
	endpoints := make([]iptables.Chain, 0, 2*len(eps))
	for _, ep := range eps {
		endpoints = append(endpoints, in.Memo.chains(ep, r.endpointChains)...)
	}
	filterUses := make([]tierUse, 0, 2*len(eps)+4*len(heps))
	var rawUses, mangleUses []tierUse
	var profiles []string
	for _, ep := range eps {
		filterUses = append(filterUses, tierUse{DirIngress, ep.tiers(DirIngress)}, tierUse{DirEgress, ep.tiers(DirEgress)})
		profiles = append(profiles, ep.Profiles...)
	}
	var hosts []iptables.Chain
	if len(heps) > 0 {
		hosts = r.hostFilterChains(heps, present)
		t.Raw = r.hostRawChains(heps)
		t.Mangle = r.hostMangleChains(heps)
		for _, h := range heps {
			filterUses = append(filterUses, tierUse{DirIngress, h.IngressTiers}, tierUse{DirEgress, h.EgressTiers},
				tierUse{DirIngress, h.ForwardIngressTiers}, tierUse{DirEgress, h.ForwardEgressTiers})
			rawUses = append(rawUses, tierUse{DirIngress, h.UntrackedIngressTiers}, tierUse{DirEgress, h.UntrackedEgressTiers})
			mangleUses = append(mangleUses, tierUse{DirIngress, h.PreDNATTiers})
			profiles = append(profiles, h.Profiles...)
		}
		// REJECT exists only in the filter table: raw and mangle DROP.
		t.Raw = append(t.Raw, r.policyChains(rawUses, in, "-j DROP")...)
		t.Mangle = append(t.Mangle, r.policyChains(mangleUses, in, "-j DROP")...)
	}
	policies := r.policyChains(filterUses, in, r.cfg.filterDeny())
	// One allocation for the table, not one per part appended.
	t.Filter = slices.Concat(static, dispatch, endpoints, hosts, policies, r.profileChains(profiles, in))
	t.NAT = r.natChains(eps, in)
	return t, r.setList()
}

// tierUse is one direction's tiers of an endpoint, whose policies need
// chains.
type tierUse struct {
	dir   string
	tiers []Tier
}

// renderer holds one Render call's configuration and the IP sets in use.
type renderer struct {
	cfg   Config
	sets  map[string]IPSetSpec // by name
	names map[IPSetSpec]string // spec as asked (before canonical selectors) -> name
	// policyNames caches PolicyChainName (a hash) per policy and direction.
	policyNames map[policyUse]string
	// wildcardHEP: a "*" host endpoint exists; its ingress policy also
	// polices traffic from local workloads to the host.
	wildcardHEP bool
	memo        *Memo // nil: render everything
	// named collects the IP sets named while rulesChain renders a chain
	// (nil otherwise).
	named []IPSetSpec
}

type policyUse struct {
	dir string
	key PolicyKey
}

func (r *renderer) policyChain(dir string, k PolicyKey) string {
	u := policyUse{dir, k}
	n, ok := r.policyNames[u]
	if !ok {
		if n, ok = r.memo.policyChainName(u); !ok {
			n = PolicyChainName(dir, k)
			r.memo.putPolicyChainName(u, n)
		}
		r.policyNames[u] = n
	}
	return n
}

// ipset records an IP set in use and returns its name.
func (r *renderer) ipset(spec IPSetSpec) string {
	if n, ok := r.names[spec]; ok {
		r.noteSet(n)
		return n
	}
	asked := spec
	if spec.Kind == IPSetSelector || spec.Kind == IPSetNamedPort {
		spec.Selector = canonicalSelector(spec.Selector)
		if spec.NamespaceSelector != "" {
			spec.NamespaceSelector = canonicalSelector(spec.NamespaceSelector)
		}
		if spec.ServiceAccountSelector != "" {
			spec.ServiceAccountSelector = canonicalSelector(spec.ServiceAccountSelector)
		}
	}
	spec.Name = IPSetName(r.cfg.IPVersion, spec)
	r.sets[spec.Name] = spec
	r.names[asked] = spec.Name
	r.noteSet(spec.Name)
	return spec.Name
}

// noteSet records set name as used by the chain rulesChain is rendering.
func (r *renderer) noteSet(name string) {
	if r.named != nil {
		r.named = append(r.named, r.sets[name])
	}
}

func (r *renderer) setList() []IPSetSpec {
	out := make([]IPSetSpec, 0, len(r.sets))
	for _, s := range r.sets {
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b IPSetSpec) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// sortedEndpoints orders endpoints by interface; of several with the same
// interface (a calculation bug) the first given wins.
func sortedEndpoints(in []Endpoint) []Endpoint {
	// The calculation hands them over in this order, each interface
	// once: then no copy.
	if strictlyByIface(in) {
		return in
	}
	// Sort positions, not the structs: moving 250 large structs about
	// cost more than the rest of a memoised render.
	idx := make([]int, len(in))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(in[a].Iface, in[b].Iface) })
	out := make([]Endpoint, 0, len(in))
	for _, i := range idx {
		if len(out) == 0 || out[len(out)-1].Iface != in[i].Iface {
			out = append(out, in[i])
		}
	}
	return out
}

// strictlyByIface reports whether eps are sorted by interface with no
// interface twice.
func strictlyByIface(eps []Endpoint) bool {
	for i := 1; i < len(eps); i++ {
		if eps[i-1].Iface >= eps[i].Iface {
			return false
		}
	}
	return true
}

func rule(match, action, comment string) iptables.Rule {
	return iptables.Rule{Match: match, Action: action, Comment: comment}
}

// filterStatic is the fixed part of the filter table; with host
// endpoints (heps) it also dispatches to their chains, and reports which
// failsafe chains it rendered.
//
// With host endpoints, a packet the raw table (untracked policy) or the
// mangle table (pre-DNAT policy) allowed arrives with the accept mark:
// cali-INPUT and cali-OUTPUT accept it at once, and cali-FORWARD skips
// the forward ingress policy of its host endpoint for it, as Calico does.
func (r *renderer) filterStatic(heps bool) ([]iptables.Chain, map[string]bool) {
	c := r.cfg
	// Each workload rule comes once per interfacePrefix (-i cali+, -i tap+).
	each := func(flag, action, comment string) []iptables.Rule {
		var out []iptables.Rule
		for _, m := range c.workloadMatches(flag) {
			out = append(out, rule(m, action, comment))
		}
		return out
	}
	dispatch := slices.Concat(each("-i", "-j "+ChainFromWlDispatch, ""), each("-o", "-j "+ChainToWlDispatch, ""))
	ours := c.MarkAccept | c.MarkPass | c.MarkScratch
	// Every forwarded packet reaches the first rule: it clears our marks
	// only where one is set (a native mark comparison under iptables-nft,
	// so the usual packet, unmarked, skips the rule's hash comment and the
	// MARK target, both xtables extensions run through nft_compat per
	// packet), and carries no text comment (a second such extension).
	fwd := iptables.Chain{Name: ChainForward, Rules: slices.Concat([]iptables.Rule{rule(markAny(ours), clearMark(ours), "")}, // clear our marks
		dispatch, []iptables.Rule{rule(markSet(c.MarkAccept), c.filterAllow(), "Policy explicitly accepted packet")})}
	input := iptables.Chain{Name: ChainInput, Rules: each("-i", "-g "+ChainWorkloadToHost, "")}
	output := iptables.Chain{Name: ChainOutput, Rules: each("-o", "-j RETURN", "Host to workload traffic is not policed, as in Calico")}
	present := map[string]bool{}
	if !c.HostEndpoints {
		return []iptables.Chain{fwd, input, r.workloadToHost(), output}, present
	}
	var failsafes []iptables.Chain
	for _, ch := range []iptables.Chain{r.failsafe(ChainFailsafeIn, c.FailsafeInbound, "-s"), r.failsafe(ChainFailsafeOut, c.FailsafeOutbound, "-d")} {
		if len(ch.Rules) > 0 {
			present[ch.Name] = true
			failsafes = append(failsafes, ch)
		}
	}
	if heps {
		fwd.Rules = slices.Concat([]iptables.Rule{
			// Clear our marks but the accept mark of untracked or pre-DNAT
			// policy (no text comment: see above).
			rule(markAny(c.MarkPass|c.MarkScratch), clearMark(c.MarkPass|c.MarkScratch), ""),
			rule(markClear(c.MarkAccept), "-j "+ChainFromHostEPFwd, ""),
		}, dispatch, []iptables.Rule{
			rule("", "-j "+ChainToHostEPFwd, ""),
			rule(markSet(c.MarkAccept), c.filterAllow(), "Policy explicitly accepted packet"),
		})
		hostRules := func(dispatch string) []iptables.Rule {
			return []iptables.Rule{
				rule(markSet(c.MarkAccept), c.filterAllow(), "Untracked or pre-DNAT policy allowed the packet"),
				rule("", clearMark(ours), "Clear our marks"),
				rule("", "-j "+dispatch, ""),
				rule(markSet(c.MarkAccept), c.filterAllow(), "Host endpoint policy accepted packet"),
			}
		}
		input.Rules = append(input.Rules, hostRules(ChainFromHostEP)...)
		output.Rules = append(output.Rules, hostRules(ChainToHostEP)...)
	}
	return append([]iptables.Chain{fwd, input, r.workloadToHost(), output}, failsafes...), present
}

// workloadToHost polices traffic from workloads to the host itself.
func (r *renderer) workloadToHost() iptables.Chain {
	ch := iptables.Chain{Name: ChainWorkloadToHost}
	if r.cfg.IPVersion == 4 {
		// Host veths have route_localnet=1 (so DNAT to the host's loopback
		// works), which also lets a pod send to 127.0.0.0/8 itself and reach
		// services the node binds to loopback only (CVE-2020-8558). Only
		// what conntrack DNATed there may pass; this runs before anything
		// can accept. IPv6 needs no such rule: it has no route_localnet,
		// and the kernel drops ::1 arriving on any interface but lo.
		ch.Rules = append(ch.Rules, rule("-d 127.0.0.0/8 -m conntrack ! --ctstate DNAT", "-j DROP",
			"Drop workload traffic to the host's loopback unless DNATed there"))
	}
	if r.cfg.IPVersion == 6 {
		// Workloads need these to reach the host as their router: MLD
		// (130-132), router solicitation (133), neighbour discovery
		// (135, 136). Accepted before egress policy, as Calico does.
		for _, t := range []int{130, 131, 132, 133, 135, 136} {
			ch.Rules = append(ch.Rules, rule("-p ipv6-icmp -m icmp6 --icmpv6-type "+strconv.Itoa(t), "-j ACCEPT", ""))
		}
	}
	ch.Rules = append(ch.Rules, rule("", "-j "+ChainFromWlDispatch, ""))
	if act := r.cfg.endpointToHostAction(); r.wildcardHEP && act != "-j DROP" {
		// A "*" host endpoint protects the host from every interface,
		// workload interfaces included: what the workload's egress policy
		// let through still needs the endpoint's ingress policy (after its
		// failsafe ports), as Calico's all-interfaces host endpoints do.
		ch.Rules = append(ch.Rules, rule("", "-j "+HostEndpointChainName("fh", AllInterfaces), "Ingress policy of the * host endpoint"))
	}
	ch.Rules = append(ch.Rules, rule("", r.cfg.endpointToHostAction(), "Configured DefaultEndpointToHostAction"))
	return ch
}

// failsafe renders failsafe ports; netFlag restricts a port's network.
func (r *renderer) failsafe(name string, ports []ProtoPort, netFlag string) iptables.Chain {
	ch := iptables.Chain{Name: name}
	for _, p := range ports {
		proto := strings.ToLower(p.Protocol)
		if (proto != "tcp" && proto != "udp" && proto != "sctp") || p.Port == 0 {
			continue
		}
		m := "-p " + proto + " -m " + proto + " --dport " + strconv.Itoa(int(p.Port))
		if p.Net.IsValid() {
			if p.Net.Addr().Is4() != (r.cfg.IPVersion == 4) {
				continue
			}
			m = netFlag + " " + p.Net.Masked().String() + " " + m
		}
		ch.Rules = append(ch.Rules, rule(m, "-j ACCEPT", ""))
	}
	return ch
}

// policyChains renders one chain per policy and direction in uses; a policy missing from the input gets an empty chain (no verdict, so
// the endpoint's default drop applies).
// deny is the target of Deny rules in the table the chains are for.
func (r *renderer) policyChains(uses []tierUse, in Input, deny string) []iptables.Chain {
	refs := 0
	for _, u := range uses {
		for _, t := range u.tiers {
			refs += len(t.Policies)
		}
	}
	used := make(map[string]policyUse, min(refs, len(in.Policies)*2))
	for _, u := range uses {
		for _, t := range u.tiers {
			for _, k := range t.Policies {
				used[r.policyChain(u.dir, k)] = policyUse{u.dir, k}
			}
		}
	}
	var out []iptables.Chain
	for _, name := range sortedKeys(used) {
		u := used[name]
		pol := in.Policies[u.key]
		rs := pol.Ingress
		if u.dir == DirEgress {
			rs = pol.Egress
		}
		out = append(out, r.rulesChain(name, rs, u.key.Namespace, deny))
	}
	return out
}

// profileChains is policyChains for profiles.
func (r *renderer) profileChains(profiles []string, in Input) []iptables.Chain {
	type use struct{ dir, name string }
	used := map[string]use{}
	seen := make(map[string]bool, 8)
	for _, p := range profiles {
		if seen[p] {
			continue // every pod of a namespace names its profile
		}
		seen[p] = true
		used[ProfileChainName(DirIngress, p)] = use{DirIngress, p}
		used[ProfileChainName(DirEgress, p)] = use{DirEgress, p}
	}
	var out []iptables.Chain
	for _, name := range sortedKeys(used) {
		u := used[name]
		prof := in.Profiles[u.name]
		rs := prof.Ingress
		if u.dir == DirEgress {
			rs = prof.Egress
		}
		out = append(out, r.rulesChain(name, rs, "", r.cfg.filterDeny()))
	}
	return out
}

// rulesChain renders a policy's or profile's rules of one direction as
// chain name, or takes it from the memo (with the IP sets it names) when
// rendered from the same rules before.
func (r *renderer) rulesChain(name string, rs []api.Rule, ns, deny string) iptables.Chain {
	if ch, sets, ok := r.memo.rulesChain(name, rs, ns, deny); ok {
		for _, s := range sets {
			r.sets[s.Name] = s
		}
		return ch
	}
	outer := r.named
	r.named = []IPSetSpec{}
	ch := iptables.Chain{Name: name}
	for i := range rs {
		ch.Rules = append(ch.Rules, r.policyRule(&rs[i], ns, deny)...)
	}
	r.memo.putRulesChain(name, rs, ns, deny, ch, slices.Clip(r.named))
	r.named = outer
	return ch
}

// natChains renders floating IPs and NAT outgoing.
func (r *renderer) natChains(eps []Endpoint, in Input) []iptables.Chain {
	v4 := r.cfg.IPVersion == 4
	var nats []NAT
	for _, ep := range eps {
		for _, n := range ep.NATs {
			if n.Internal.Is4() == v4 && n.External.Is4() == v4 && n.Internal.IsValid() && n.External.IsValid() {
				nats = append(nats, n)
			}
		}
	}
	slices.SortFunc(nats, func(a, b NAT) int {
		return cmp.Or(a.External.Compare(b.External), a.Internal.Compare(b.Internal))
	})
	nats = slices.Compact(nats)
	dnat := iptables.Chain{Name: ChainFloatingIPDNAT}
	snat := iptables.Chain{Name: ChainFloatingIPSNAT}
	for _, n := range nats {
		in, ex := hostPrefix(n.Internal), hostPrefix(n.External)
		dnat.Rules = append(dnat.Rules, rule("-d "+ex, "-j DNAT --to-destination "+n.Internal.String(), ""))
		// Hairpin: a workload reaching its own floating IP sees the reply
		// come from the floating IP.
		snat.Rules = append(snat.Rules, rule("-s "+in+" -d "+in, "-j SNAT --to-source "+n.External.String(), ""))
	}
	masq := iptables.Chain{Name: ChainNATOutgoing}
	if len(in.NATOutgoingPools) > 0 {
		m := r.ipset(IPSetSpec{Kind: IPSetPools, NATOutgoing: true})
		all := r.ipset(IPSetSpec{Kind: IPSetPools})
		match := "-m set --match-set " + m + " src -m set ! --match-set " + all + " dst"
		if r.cfg.NATOutgoingExcludeHosts && r.cfg.IPVersion == 4 {
			match += " -m set ! --match-set " + r.ipset(IPSetSpec{Kind: IPSetAllHosts}) + " dst"
		}
		masq.Rules = append(masq.Rules, r.cfg.natOutgoingRules(match)...)
	}
	return []iptables.Chain{
		{Name: ChainNATPrerouting, Rules: []iptables.Rule{rule("", "-j "+ChainFloatingIPDNAT, "")}},
		{Name: ChainNATOutput, Rules: []iptables.Rule{rule("", "-j "+ChainFloatingIPDNAT, "")}},
		{Name: ChainNATPostrouting, Rules: []iptables.Rule{
			rule("", "-j "+ChainFloatingIPSNAT, ""),
			rule("", "-j "+ChainNATOutgoing, ""),
		}},
		dnat, snat, masq,
	}
}

// hostPrefix is a /32 or /128 for a.
func hostPrefix(a netip.Addr) string { return netip.PrefixFrom(a, a.BitLen()).String() }

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
