package rules

import (
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/calico-aio/calico-aio/iptables"
)

// sim is a small iptables interpreter for the matches and targets the
// renderer emits, so tests can check verdicts of whole tables rather than
// only their text.
type sim struct {
	t      *testing.T
	chains map[string][]iptables.Rule
	sets   map[string][]string // name -> "10.0.0.1/32" or "10.0.0.1,tcp:80"
}

type packet struct {
	in, out      string
	src, dst     netip.Addr
	proto        int
	sport, dport int
	icmpType     int
	ct           string // NEW, ESTABLISHED, INVALID, or several: "NEW,DNAT"
	mark         uint32
	logged       int
	notrack      bool // the raw table said not to track it
}

func newSim(t *testing.T, chains []iptables.Chain, sets map[string][]string) *sim {
	s := &sim{t: t, chains: map[string][]iptables.Rule{}, sets: sets}
	for _, c := range chains {
		s.chains[c.Name] = c.Rules
	}
	return s
}

// verdict runs p through chain as if hooked from a built-in chain:
// ACCEPT, DROP, or RETURN (the built-in chain's other rules decide).
func (s *sim) verdict(chain string, p packet) (string, packet) {
	v := s.run(chain, &p, 0)
	return v, p
}

func (s *sim) run(chain string, p *packet, depth int) string {
	rules, ok := s.chains[chain]
	if !ok || depth > 20 {
		s.t.Fatalf("sim: no chain %q (or loop)", chain)
	}
	for _, r := range rules {
		if !s.match(r.Match, p) {
			continue
		}
		f := strings.Fields(r.Action)
		switch {
		case f[0] == "-g":
			return s.run(f[1], p, depth+1)
		case f[1] == "ACCEPT", f[1] == "DROP", f[1] == "RETURN":
			return f[1]
		case f[1] == "LOG":
			p.logged++
		case f[1] == "NOTRACK":
			p.notrack = true
		case f[1] == "MARK":
			v, m := markArg(f[3])
			p.mark = p.mark&^m | v
		default:
			if v := s.run(f[1], p, depth+1); v != "RETURN" {
				return v
			}
		}
	}
	return "RETURN"
}

func markArg(s string) (v, m uint32) {
	a, b, _ := strings.Cut(s, "/")
	x, _ := strconv.ParseUint(a, 0, 32)
	y, _ := strconv.ParseUint(b, 0, 32)
	return uint32(x), uint32(y)
}

var protoNums = map[string]int{"tcp": 6, "udp": 17, "icmp": 1, "ipv6-icmp": 58, "sctp": 132, "udplite": 136}

func (s *sim) match(m string, p *packet) bool {
	f := strings.Fields(m)
	neg := false
	for i := 0; i < len(f); i++ {
		var ok bool
		switch f[i] {
		case "!":
			neg = true
			continue
		case "-m":
			i++
			continue
		case "-i", "-o":
			i++
			iface := p.in
			if f[i-1] == "-o" {
				iface = p.out
			}
			if pre, wild := strings.CutSuffix(f[i], "+"); wild {
				ok = strings.HasPrefix(iface, pre)
			} else {
				ok = iface == f[i]
			}
		case "-s", "-d":
			i++
			a := p.src
			if f[i-1] == "-d" {
				a = p.dst
			}
			ok = netip.MustParsePrefix(f[i]).Contains(a)
		case "-p":
			i++
			n, known := protoNums[f[i]]
			if !known {
				n, _ = strconv.Atoi(f[i])
			}
			ok = p.proto == n
		case "--mark":
			i++
			v, mask := markArg(f[i])
			ok = p.mark&mask == v
		case "--ctstate": // the packet may be in several states ("NEW,DNAT")
			i++
			for _, st := range strings.Split(p.ct, ",") {
				ok = ok || slices.Contains(strings.Split(f[i], ","), st)
			}
		case "--dport":
			i++
			ok = strconv.Itoa(p.dport) == f[i]
		case "--sport":
			i++
			ok = strconv.Itoa(p.sport) == f[i]
		case "--dports", "--sports":
			i++
			port := p.dport
			if f[i-1] == "--sports" {
				port = p.sport
			}
			ok = inPortList(f[i], port)
		case "--icmp-type", "--icmpv6-type":
			i++
			ok = strconv.Itoa(p.icmpType) == f[i]
		case "--match-set":
			i += 2
			ok = s.inSet(f[i-1], f[i], *p)
		default:
			s.t.Fatalf("sim: unknown match %q in %q", f[i], m)
		}
		if ok == neg {
			return false
		}
		neg = false
	}
	return true
}

func inPortList(list string, port int) bool {
	for _, item := range strings.Split(list, ",") {
		lo, hi, isRange := strings.Cut(item, ":")
		a, _ := strconv.Atoi(lo)
		b := a
		if isRange {
			b, _ = strconv.Atoi(hi)
		}
		if port >= a && port <= b {
			return true
		}
	}
	return false
}

func (s *sim) inSet(name, dirs string, p packet) bool {
	a, port := p.src, p.sport
	if strings.HasPrefix(dirs, "dst") {
		a, port = p.dst, p.dport
	}
	for _, e := range s.sets[name] {
		if addr, pp, isPort := strings.Cut(e, ","); isPort {
			proto, num, _ := strings.Cut(pp, ":")
			if addr == a.String() && protoNums[proto] == p.proto && num == strconv.Itoa(port) {
				return true
			}
		} else if netip.MustParsePrefix(e).Contains(a) {
			return true
		}
	}
	return false
}
