package ctl

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/calico-aio/calico-aio/store/api"
)

// The classic rule words of "calicoctl profile <NAME> rule add|remove":
//
//	(allow|deny) [PROTOCOL [type N [code M]]] [from ENTITY] [to ENTITY]
//	PROTOCOL: tcp, udp, sctp, udplite, icmp, icmpv6 or a number 1-255
//	ENTITY:   [ports P[,P...]] [tag T | selector S] [cidr C | C]...
//
// Ports are N or N:M (with a port protocol). "tag T" is the selector
// has(T): classic tags became labels (profile labelsToApply).

const ruleSyntax = `(allow|deny) [PROTOCOL [type N [code M]]] [from [ports P] [tag T | selector S] [cidr C]] [to ...]`

// protocolNames maps the words to Calico's protocol names.
var protocolNames = map[string]string{
	"tcp": api.ProtocolTCP, "udp": api.ProtocolUDP, "icmp": api.ProtocolICMP, "icmpv6": api.ProtocolICMPv6,
	"sctp": api.ProtocolSCTP, "udplite": api.ProtocolUDPLite,
}

// parseRule turns rule words into a rule. Errors name the word at fault.
func parseRule(words []string) (api.Rule, error) {
	var r api.Rule
	if len(words) == 0 {
		return r, fmt.Errorf("no rule given: %s", ruleSyntax)
	}
	switch strings.ToLower(words[0]) {
	case "allow":
		r.Action = api.ActionAllow
	case "deny":
		r.Action = api.ActionDeny
	default:
		return r, fmt.Errorf("a rule starts with allow or deny, not %q", words[0])
	}
	i := 1
	if i < len(words) && !isDirectionWord(words[i]) {
		p, err := parseProtocol(words[i])
		if err != nil {
			return r, err
		}
		r.Protocol = &p
		i++
		if n, _ := p.Number(); n == 1 || n == 58 {
			var err error
			if i, err = parseICMP(words, i, &r); err != nil {
				return r, err
			}
		}
	}
	seen := map[string]bool{}
	for i < len(words) {
		dir := strings.ToLower(words[i])
		if !isDirectionWord(dir) {
			if w := strings.ToLower(words[i]); w == "type" || w == "code" {
				return r, fmt.Errorf("%q needs protocol icmp or icmpv6 before it", words[i])
			}
			return r, fmt.Errorf("unexpected %q: expected from or to (%s)", words[i], ruleSyntax)
		}
		if seen[dir] {
			return r, fmt.Errorf("%q is given twice", dir)
		}
		seen[dir] = true
		e := &r.Source
		if dir == "to" {
			e = &r.Destination
		}
		var err error
		if i, err = parseEntity(words, i+1, dir, e); err != nil {
			return r, err
		}
	}
	if len(r.Source.Ports)+len(r.Destination.Ports) > 0 && (r.Protocol == nil || !r.Protocol.SupportsPorts()) {
		return r, fmt.Errorf("ports need protocol tcp, udp, sctp or udplite")
	}
	return r, nil
}

func isDirectionWord(w string) bool {
	w = strings.ToLower(w)
	return w == "from" || w == "to"
}

func parseProtocol(w string) (api.Protocol, error) {
	if name, ok := protocolNames[strings.ToLower(w)]; ok {
		return api.ProtocolFromString(name), nil
	}
	if n, err := strconv.Atoi(w); err == nil {
		if n < 1 || n > 255 {
			return api.Protocol{}, fmt.Errorf("protocol number %d is not 1-255", n)
		}
		return api.ProtocolFromInt(n), nil
	}
	return api.Protocol{}, fmt.Errorf("unknown protocol %q: use tcp, udp, sctp, udplite, icmp, icmpv6 or a number 1-255 (or from/to)", w)
}

// parseICMP reads "type N [code M]" at words[i:].
func parseICMP(words []string, i int, r *api.Rule) (int, error) {
	if i >= len(words) || strings.ToLower(words[i]) != "type" {
		if i < len(words) && strings.ToLower(words[i]) == "code" {
			return i, fmt.Errorf("an ICMP code needs a type before it")
		}
		return i, nil
	}
	t, err := wordNumber(words, i, 0, 254)
	if err != nil {
		return i, err
	}
	r.ICMP = &api.ICMPFields{Type: &t}
	i += 2
	if i < len(words) && strings.ToLower(words[i]) == "code" {
		c, err := wordNumber(words, i, 0, 255)
		if err != nil {
			return i, err
		}
		r.ICMP.Code = &c
		i += 2
	}
	return i, nil
}

// wordNumber reads the number after the keyword words[i].
func wordNumber(words []string, i, lo, hi int) (int, error) {
	if i+1 >= len(words) {
		return 0, fmt.Errorf("%q needs a number after it", words[i])
	}
	n, err := strconv.Atoi(words[i+1])
	if err != nil || n < lo || n > hi {
		return 0, fmt.Errorf("%s %q: want a number %d-%d", words[i], words[i+1], lo, hi)
	}
	return n, nil
}

// parseEntity reads the words after "from" or "to" up to the next one.
func parseEntity(words []string, i int, dir string, e *api.EntityRule) (int, error) {
	start := i
	value := func() (string, error) {
		if i+1 >= len(words) || isDirectionWord(words[i+1]) {
			return "", fmt.Errorf("%q after %q needs a value", words[i], dir)
		}
		return words[i+1], nil
	}
	for i < len(words) && !isDirectionWord(words[i]) {
		kw := strings.ToLower(words[i])
		switch kw {
		case "ports":
			v, err := value()
			if err != nil {
				return i, err
			}
			for _, s := range strings.Split(v, ",") {
				p, err := api.ParsePort(strings.TrimSpace(s))
				if err != nil {
					return i, fmt.Errorf("ports after %q: %w", dir, err)
				}
				e.Ports = append(e.Ports, p)
			}
			i += 2
		case "tag", "selector":
			v, err := value()
			if err != nil {
				return i, err
			}
			if e.Selector != "" {
				return i, fmt.Errorf("give one tag or selector after %q, not several", dir)
			}
			if kw == "tag" {
				if !tagRe().MatchString(v) {
					return i, fmt.Errorf("tag %q: a tag is a label name (letters, digits, '-', '_', '.', '/')", v)
				}
				e.Selector = "has(" + v + ")"
			} else {
				e.Selector = v
			}
			i += 2
		case "cidr":
			v, err := value()
			if err != nil {
				return i, err
			}
			n, ok := parseNet(v)
			if !ok {
				return i, fmt.Errorf("cidr %q after %q is not a CIDR or an address", v, dir)
			}
			e.Nets = append(e.Nets, n)
			i += 2
		default:
			n, ok := parseNet(words[i])
			if !ok {
				return i, fmt.Errorf("unexpected %q after %q: expected ports, tag, selector or cidr", words[i], dir)
			}
			e.Nets = append(e.Nets, n)
			i++
		}
	}
	if i == start {
		return i, fmt.Errorf("%q needs ports, tag, selector or cidr after it", dir)
	}
	return i, nil
}

var (
	tagRe    = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9_./]*[A-Za-z0-9])?$`) })
	hasTagRe = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^has\(([A-Za-z0-9]([-A-Za-z0-9_./]*[A-Za-z0-9])?)\)$`)
	})
)

// parseNet reads a CIDR or an address (as /32 or /128).
func parseNet(s string) (string, bool) {
	if p, err := netip.ParsePrefix(s); err == nil {
		return p.Masked().String(), true
	}
	if a, err := netip.ParseAddr(s); err == nil {
		a = a.Unmap()
		return netip.PrefixFrom(a, a.BitLen()).String(), true
	}
	return "", false
}

// formatRule writes a rule in the words parseRule reads. Parts of a v3
// rule those words cannot say are named at the end.
func formatRule(r api.Rule) string {
	parts := []string{strings.ToLower(string(r.Action))}
	if r.Protocol != nil {
		parts = append(parts, protocolWord(*r.Protocol))
	}
	if r.ICMP != nil && r.ICMP.Type != nil {
		parts = append(parts, "type", strconv.Itoa(*r.ICMP.Type))
		if r.ICMP.Code != nil {
			parts = append(parts, "code", strconv.Itoa(*r.ICMP.Code))
		}
	}
	for _, d := range []struct {
		word string
		e    api.EntityRule
	}{{"from", r.Source}, {"to", r.Destination}} {
		if w := entityWords(d.e); len(w) > 0 {
			parts = append(append(parts, d.word), w...)
		}
	}
	if more := ruleExtras(r); len(more) > 0 {
		parts = append(parts, "(also "+strings.Join(more, ", ")+": see 'rule json')")
	}
	return strings.Join(parts, " ")
}

func protocolWord(p api.Protocol) string {
	if p.IsNumeric() {
		return p.String()
	}
	return strings.ToLower(p.String())
}

func entityWords(e api.EntityRule) []string {
	var w []string
	if len(e.Ports) > 0 {
		ps := make([]string, len(e.Ports))
		for i, p := range e.Ports {
			ps[i] = p.String()
		}
		w = append(w, "ports", strings.Join(ps, ","))
	}
	if m := hasTagRe().FindStringSubmatch(e.Selector); m != nil {
		w = append(w, "tag", m[1])
	} else if e.Selector != "" {
		w = append(w, "selector", quoteWord(e.Selector))
	}
	for _, n := range e.Nets {
		w = append(w, "cidr", n)
	}
	return w
}

// quoteWord quotes a word that a shell would split or glob.
func quoteWord(s string) string {
	if strings.ContainsAny(s, " \t\"'()!&|*?$\\") {
		return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
	}
	return s
}

// ruleExtras names the fields of r the rule words cannot express.
func ruleExtras(r api.Rule) []string {
	var out []string
	add := func(cond bool, name string) {
		if cond {
			out = append(out, name)
		}
	}
	add(r.IPVersion != nil, "ipVersion")
	add(r.NotProtocol != nil, "notProtocol")
	add(r.NotICMP != nil, "notICMP")
	add(r.ICMP != nil && r.ICMP.Type == nil, "icmp")
	add(r.HTTP != nil, "http")
	add(r.Metadata != nil, "metadata")
	for _, d := range []struct {
		name string
		e    api.EntityRule
	}{{"source", r.Source}, {"destination", r.Destination}} {
		e := d.e
		add(len(e.NotNets) > 0, d.name+".notNets")
		add(e.NotSelector != "", d.name+".notSelector")
		add(len(e.NotPorts) > 0, d.name+".notPorts")
		add(e.NamespaceSelector != "", d.name+".namespaceSelector")
		add(e.Services != nil, d.name+".services")
		add(e.ServiceAccounts != nil, d.name+".serviceAccounts")
	}
	return out
}

// sameRule compares rules by meaning: ports and protocols are compared in
// one form whichever JSON form they were stored in.
func sameRule(a, b api.Rule) bool {
	ja, erra := json.Marshal(normalizeRule(a))
	jb, errb := json.Marshal(normalizeRule(b))
	return erra == nil && errb == nil && string(ja) == string(jb)
}

func normalizeRule(r api.Rule) api.Rule {
	norm := func(ps []api.Port) []api.Port {
		out := make([]api.Port, len(ps))
		for i, p := range ps {
			if q, err := api.ParsePort(p.String()); err == nil {
				out[i] = q
			} else {
				out[i] = p
			}
		}
		return out
	}
	proto := func(p *api.Protocol) *api.Protocol {
		if p == nil {
			return nil
		}
		if name, ok := protocolNames[strings.ToLower(p.String())]; ok {
			q := api.ProtocolFromString(name)
			return &q
		}
		return p
	}
	r.Protocol, r.NotProtocol = proto(r.Protocol), proto(r.NotProtocol)
	for _, e := range []*api.EntityRule{&r.Source, &r.Destination} {
		if len(e.Ports) > 0 {
			e.Ports = norm(e.Ports)
		}
		if len(e.NotPorts) > 0 {
			e.NotPorts = norm(e.NotPorts)
		}
	}
	return r
}

// rulePosition turns --at (1 is first, negative counts from the end, -1 is
// last) into an index into a list of n rules; forAdd allows one past the end.
func rulePosition(at string, n int, forAdd bool) (int, error) {
	pos, err := strconv.Atoi(at)
	if err != nil || pos == 0 {
		return 0, fmt.Errorf("--at=%s: want a position (1 is first, -1 is last)", at)
	}
	size := n
	if forAdd {
		size = n + 1 // positions in the list with the new rule
	}
	if pos < 0 {
		pos = size + 1 + pos
	}
	if pos < 1 || pos > size {
		if size == 0 {
			return 0, fmt.Errorf("--at=%s: there are no rules", at)
		}
		return 0, fmt.Errorf("--at=%s: want a position from 1 to %d (or -1 to -%d)", at, size, size)
	}
	return pos - 1, nil
}
