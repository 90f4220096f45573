package rules

import (
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/calico-aio/calico-aio/iptables"
	"github.com/calico-aio/calico-aio/store/api"
)

// A policy or profile rule becomes one or more iptables rules:
//
//   - Everything that must hold at once (protocol, a single negated net,
//     IP set matches, negated ports, ICMP) goes into every iptables rule.
//   - Lists that mean "any of" (several nets, ports beyond the 15 that one
//     multiport match holds, each named port) multiply out into
//     alternatives, one iptables rule each.
//   - iptables allows one -s and one -d per rule, so negated nets that do
//     not fit inline use the scratch mark: the alternatives set it, each
//     excluded net clears it, and the action applies to packets that kept
//     it. A Log rule with several alternatives uses the same scheme so that
//     a packet is logged once.
//
// The scratch mark is clear between rules: whoever sets it clears it.

// DefaultLogPrefix is Calico's logPrefix: Log rules log as
// "calico-packet: ".
const DefaultLogPrefix = "calico-packet"

// maxMultiport is how many ports one multiport match holds (a range counts
// twice).
const maxMultiport = 15

// policyRule renders rule for a policy in namespace ns ("" for global
// policies and profiles); deny is the target of a Deny rule in the table
// rendered for. It returns nothing for a rule that cannot match in this IP
// version.
func (r *renderer) policyRule(rule *api.Rule, ns, deny string) []iptables.Rule {
	v := r.cfg.IPVersion
	if rule.IPVersion != nil && *rule.IPVersion != v {
		return nil
	}
	switch rule.Action {
	case api.ActionAllow, api.ActionDeny, api.ActionPass, api.ActionLog:
	default:
		return nil
	}
	// An http match (application layer policy) cannot be expressed here
	// and is refused at write; in a rule another tool wrote it fails
	// closed: a Deny rule ignores it and so denies more, any other rule is
	// left out and so allows less.
	if rule.HTTP != nil && rule.Action != api.ActionDeny {
		return nil
	}
	var slots [][]string
	add := func(frags ...string) {
		for _, f := range frags {
			if f != "" {
				slots = append(slots, []string{f})
			}
		}
	}
	var protoNum uint8
	if rule.Protocol != nil {
		arg, n, ok := protocolArg(*rule.Protocol)
		if !ok || (n == 1 && v == 6) || (n == 58 && v == 4) {
			return nil // ICMP never matches IPv6 packets, nor ICMPv6 IPv4 ones
		}
		protoNum = n
		add("-p " + arg)
	}
	// iptables takes one -p: with a protocol, notProtocol only matters
	// when it is the same protocol, and then nothing matches.
	if rule.NotProtocol != nil {
		if arg, n, ok := protocolArg(*rule.NotProtocol); ok {
			if rule.Protocol == nil {
				add("! -p " + arg)
			} else if n == protoNum {
				return nil
			}
		}
	}
	var extra []string
	for _, s := range []struct {
		e   *api.EntityRule
		src bool
	}{{&rule.Source, true}, {&rule.Destination, false}} {
		sideSlots, sideExtra, ok := r.entity(s.e, s.src, ns, protoNum)
		if !ok {
			return nil
		}
		slots = append(slots, sideSlots...)
		extra = append(extra, sideExtra...)
	}
	if (protoNum == 1 && v == 4) || (protoNum == 58 && v == 6) {
		add(icmpMatch(v, rule.ICMP, false), icmpMatch(v, rule.NotICMP, true))
	}
	alts := product(slots)
	if len(alts) == 0 {
		return nil
	}
	return r.emit(alts, extra, rule.Action, deny)
}

// entity renders one side of a rule: slots of alternatives (a slot with
// several entries is an "any of"), extra negated nets (each a match whose
// packets are excluded), and ok false when the side can never match.
func (r *renderer) entity(e *api.EntityRule, src bool, ns string, protoNum uint8) (slots [][]string, extra []string, ok bool) {
	flag, dir, portsFlag := "-d", "dst", "--dports"
	if src {
		flag, dir, portsFlag = "-s", "src", "--sports"
	}
	nets, had := r.familyNets(e.Nets)
	if had && len(nets) == 0 {
		return nil, nil, false // only nets of the other IP version
	}
	notNets, _ := r.familyNets(e.NotNets)
	if len(nets) > 0 {
		slots = append(slots, prefixAll(flag+" ", nets))
		extra = prefixAll(flag+" ", notNets)
	} else if len(notNets) > 0 {
		slots = append(slots, []string{"! " + flag + " " + notNets[0]})
		extra = prefixAll(flag+" ", notNets[1:])
	}

	// A Kubernetes Service (validation allows no selector or net beside
	// it): as a source its endpoints' addresses, as a destination its
	// endpoints' addresses with their ports. The namespace defaults to the
	// policy's.
	if sv := e.Services; sv != nil {
		svcNS := sv.Namespace
		if svcNS == "" {
			svcNS = ns
		}
		if src {
			name := r.ipset(IPSetSpec{Kind: IPSetService, Service: svcNS + "/" + sv.Name})
			slots = append(slots, []string{"-m set --match-set " + name + " src"})
		} else {
			name := r.ipset(IPSetSpec{Kind: IPSetServicePorts, Service: svcNS + "/" + sv.Name})
			slots = append(slots, []string{"-m set --match-set " + name + " dst,dst"})
		}
	}

	// Selectors: a namespaced policy's selectors only see its namespace,
	// unless the rule gives a namespace selector.
	sel := strings.TrimSpace(e.Selector)
	if sa := e.ServiceAccounts; sa != nil && len(sa.Names) > 0 {
		names := slices.Clone(sa.Names)
		slices.Sort(names)
		sel = andSelector(sel, api.LabelServiceAccount+` in {"`+strings.Join(names, `", "`)+`"}`)
	}
	saSel := ""
	if sa := e.ServiceAccounts; sa != nil {
		saSel = strings.TrimSpace(sa.Selector)
	}
	nsSel := strings.TrimSpace(e.NamespaceSelector)
	if nsSel == "" && ns != "" && (sel != "" || e.NotSelector != "" || saSel != "") {
		sel = andSelector(sel, api.LabelNamespace+` == "`+ns+`"`)
	}
	if sel == "" && (nsSel != "" || saSel != "") {
		sel = "all()"
	}
	if sel != "" {
		name := r.ipset(IPSetSpec{Kind: IPSetSelector, Selector: sel, NamespaceSelector: nsSel, ServiceAccountSelector: saSel})
		slots = append(slots, []string{"-m set --match-set " + name + " " + dir})
	}
	if e.NotSelector != "" {
		name := r.ipset(IPSetSpec{Kind: IPSetSelector, Selector: e.NotSelector})
		slots = append(slots, []string{"-m set ! --match-set " + name + " " + dir})
	}

	// Ports: numeric ones in multiport chunks, named ones as IP sets of
	// address,protocol:port of the endpoints the side's selector matches.
	proto := portProtocol(protoNum)
	namedSet := func(port string) string {
		s := sel
		if s == "" {
			s = "all()"
		}
		name := r.ipset(IPSetSpec{Kind: IPSetNamedPort, Selector: s, NamespaceSelector: nsSel, PortName: port, Protocol: proto})
		return name + " " + dir + "," + dir
	}
	// Without a protocol that has ports (validation requires one) no port
	// matches: positive ports leave the rule out, negated ones are moot.
	if len(e.Ports) > 0 {
		var alt []string // empty when no port can match: the rule is left out
		if proto != "" {
			chunks, named := splitPorts(e.Ports)
			alt = prefixAll("-m multiport "+portsFlag+" ", chunks)
			for _, n := range named {
				alt = append(alt, "-m set --match-set "+namedSet(n))
			}
		}
		slots = append(slots, alt)
	}
	if len(e.NotPorts) > 0 && proto != "" {
		chunks, named := splitPorts(e.NotPorts)
		for _, c := range chunks {
			slots = append(slots, []string{"-m multiport ! " + portsFlag + " " + c})
		}
		for _, n := range named {
			slots = append(slots, []string{"-m set ! --match-set " + namedSet(n)})
		}
	}
	return slots, extra, true
}

// emit renders the alternatives of a rule with its action.
func (r *renderer) emit(alts, extra []string, action api.Action, deny string) []iptables.Rule {
	acc, pass, scratch := r.cfg.MarkAccept, r.cfg.MarkPass, r.cfg.MarkScratch
	var out []iptables.Rule
	add := func(match, act string) { out = append(out, iptables.Rule{Match: match, Action: act}) }
	if len(extra) > 0 || (len(alts) > 1 && action == api.ActionLog) {
		for _, a := range alts {
			add(a, setMark(scratch))
		}
		for _, n := range extra {
			add(n, clearMark(scratch))
		}
		switch action {
		case api.ActionAllow:
			add(markSet(scratch), setMarkClearing(acc, scratch))
			add(markSet(acc), "-j RETURN")
		case api.ActionPass:
			add(markSet(scratch), setMarkClearing(pass, scratch))
			add(markSet(pass), "-j RETURN")
		case api.ActionDeny:
			add(markSet(scratch), deny)
		case api.ActionLog:
			add(r.cfg.logMatch(markSet(scratch)), r.cfg.logAction())
			add("", clearMark(scratch))
		}
		return out
	}
	switch action {
	case api.ActionAllow:
		for _, a := range alts {
			add(a, setMark(acc))
		}
		add(markSet(acc), "-j RETURN")
	case api.ActionPass:
		for _, a := range alts {
			add(a, setMark(pass))
		}
		add(markSet(pass), "-j RETURN")
	case api.ActionDeny:
		for _, a := range alts {
			add(a, deny)
		}
	case api.ActionLog:
		add(r.cfg.logMatch(alts[0]), r.cfg.logAction())
	}
	return out
}

// familyNets parses nets (CIDRs or single addresses) and keeps those of
// the IP version, canonical and de-duplicated; had reports whether the
// list was non-empty.
func (r *renderer) familyNets(nets []string) (out []string, had bool) {
	for _, n := range nets {
		p, err := netip.ParsePrefix(strings.TrimSpace(n))
		if err != nil {
			a, err2 := netip.ParseAddr(strings.TrimSpace(n))
			if err2 != nil {
				continue
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		if p.Addr().Is4() != (r.cfg.IPVersion == 4) {
			continue
		}
		if s := p.Masked().String(); !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out, len(nets) > 0
}

// protocolArg is the -p argument for a protocol: the names iptables knows
// without /etc/protocols, else the number.
func protocolArg(p api.Protocol) (arg string, num uint8, ok bool) {
	n, ok := p.Number()
	if !ok {
		return "", 0, false
	}
	switch n {
	case 1:
		return "icmp", n, true
	case 6:
		return "tcp", n, true
	case 17:
		return "udp", n, true
	case 58:
		return "ipv6-icmp", n, true
	case 132:
		return "sctp", n, true
	case 136:
		return "udplite", n, true
	}
	return strconv.Itoa(int(n)), n, true
}

// portProtocol is the protocol name of named-port IP set entries, or ""
// for a protocol without ports.
func portProtocol(n uint8) string {
	switch n {
	case 6:
		return "tcp"
	case 17:
		return "udp"
	case 132:
		return "sctp"
	case 136:
		return "udplite"
	}
	return ""
}

// splitPorts puts numeric ports into multiport lists of at most 15 ports
// (a range counts twice) and returns the port names, de-duplicated.
func splitPorts(ports []api.Port) (chunks, names []string) {
	var cur []string
	used := 0
	for _, p := range ports {
		if p.PortName != "" {
			if !slices.Contains(names, p.PortName) {
				names = append(names, p.PortName)
			}
			continue
		}
		if p.MinPort == 0 || p.MinPort > p.MaxPort {
			continue // invalid; validation rejects it
		}
		s, w := strconv.Itoa(int(p.MinPort)), 1
		if p.MaxPort != p.MinPort {
			s, w = s+":"+strconv.Itoa(int(p.MaxPort)), 2
		}
		if used+w > maxMultiport {
			chunks = append(chunks, strings.Join(cur, ","))
			cur, used = nil, 0
		}
		cur = append(cur, s)
		used += w
	}
	if len(cur) > 0 {
		chunks = append(chunks, strings.Join(cur, ","))
	}
	return chunks, names
}

// icmpMatch matches an ICMP (v4) or ICMPv6 type and code; "" when no type.
func icmpMatch(v int, f *api.ICMPFields, negate bool) string {
	if f == nil || f.Type == nil {
		return ""
	}
	t := strconv.Itoa(*f.Type)
	if f.Code != nil {
		t += "/" + strconv.Itoa(*f.Code)
	}
	not := ""
	if negate {
		not = "! "
	}
	if v == 6 {
		return "-m icmp6 " + not + "--icmpv6-type " + t
	}
	return "-m icmp " + not + "--icmp-type " + t
}

// andSelector is a && b, with a possibly empty.
func andSelector(a, b string) string {
	if a == "" {
		return b
	}
	return "(" + a + ") && " + b
}

func prefixAll(prefix string, items []string) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = prefix + it
	}
	return out
}

// product multiplies out slots of alternatives into full matches, in slot
// order. A slot without alternatives makes the product empty.
func product(slots [][]string) []string {
	alts := []string{""}
	for _, s := range slots {
		next := make([]string, 0, len(alts)*len(s))
		for _, a := range alts {
			for _, c := range s {
				if a == "" {
					next = append(next, c)
				} else {
					next = append(next, a+" "+c)
				}
			}
		}
		alts = next
	}
	return alts
}
