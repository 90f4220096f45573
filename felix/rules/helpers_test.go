package rules

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/calico-aio/calico-aio/iptables"
	"github.com/calico-aio/calico-aio/store/api"
)

// dump renders tables as text: per table "*name", then per chain ":name"
// and one "-A chain match action  # comment" line per rule.
func dump(t Tables) string {
	var b strings.Builder
	for _, tb := range []struct {
		name   string
		chains []iptables.Chain
	}{{"filter", t.Filter}, {"nat", t.NAT}, {"mangle", t.Mangle}, {"raw", t.Raw}} {
		if len(tb.chains) == 0 {
			continue
		}
		b.WriteString("*" + tb.name + "\n")
		for _, c := range tb.chains {
			b.WriteString(":" + c.Name + "\n")
		}
		for _, c := range tb.chains {
			for _, r := range c.Rules {
				b.WriteString(line(c.Name, r) + "\n")
			}
		}
	}
	return b.String()
}

func line(chain string, r iptables.Rule) string {
	s := "-A " + chain
	if r.Match != "" {
		s += " " + r.Match
	}
	s += " " + r.Action
	if r.Comment != "" {
		s += "  # " + r.Comment
	}
	return s
}

func dumpSets(specs []IPSetSpec) string {
	var b strings.Builder
	kinds := map[IPSetKind]string{IPSetSelector: "selector", IPSetNamedPort: "named-port", IPSetPools: "pools", IPSetAllHosts: "all-hosts"}
	for _, s := range specs {
		b.WriteString(s.Name + " " + kinds[s.Kind])
		if s.Selector != "" {
			b.WriteString(" sel=" + s.Selector)
		}
		if s.NamespaceSelector != "" {
			b.WriteString(" ns=" + s.NamespaceSelector)
		}
		if s.PortName != "" {
			b.WriteString(" port=" + s.Protocol + "/" + s.PortName)
		}
		if s.NATOutgoing {
			b.WriteString(" nat-outgoing")
		}
		b.WriteString("\n")
	}
	return b.String()
}

// chain returns the rules of the named chain, as "match action" lines.
func chainLines(t *testing.T, chains []iptables.Chain, name string) string {
	t.Helper()
	for _, c := range chains {
		if c.Name == name {
			var b strings.Builder
			for _, r := range c.Rules {
				b.WriteString(strings.TrimPrefix(line("", r), "-A  ") + "\n")
			}
			return b.String()
		}
	}
	t.Fatalf("no chain %s", name)
	return ""
}

// Helpers building input.

func ip(s string) netip.Addr       { return netip.MustParseAddr(s) }
func pfx(s string) netip.Prefix    { return netip.MustParsePrefix(s) }
func proto(s string) *api.Protocol { p := api.ProtocolFromString(s); return &p }
func protoNum(n int) *api.Protocol { p := api.ProtocolFromInt(n); return &p }
func intp(n int) *int              { return &n }

func portList(ps ...string) []api.Port {
	out := make([]api.Port, len(ps))
	for i, s := range ps {
		p, err := api.ParsePort(s)
		if err != nil {
			panic(err)
		}
		out[i] = p
	}
	return out
}

var testPolicy = PolicyKey{Namespace: "prod", Name: "web"}

// renderRule renders one rule as the only ingress rule of a policy in
// namespace ns (global when ""), returning the policy chain's lines and the
// IP sets.
func renderRule(t *testing.T, v int, ns string, r api.Rule) (string, []IPSetSpec) {
	t.Helper()
	key := PolicyKey{Namespace: ns, Name: "p"}
	in := Input{
		Endpoints: []Endpoint{{Iface: "cali0", Addrs: []netip.Addr{ip("10.0.0.1"), ip("fd00::1")}, IngressPolicies: []PolicyKey{key}}},
		Policies:  map[PolicyKey]Policy{key: {Key: key, Ingress: []api.Rule{r}}},
	}
	tb, sets := Render(Config{IPVersion: v}, in)
	return chainLines(t, tb.Filter, PolicyChainName(DirIngress, key)), sets
}

// lines joins expected lines.
func lines(ls ...string) string {
	if len(ls) == 0 {
		return ""
	}
	return strings.Join(ls, "\n") + "\n"
}
