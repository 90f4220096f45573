package rules

import (
	"strconv"
	"strings"
	"testing"

	"github.com/calico-aio/calico-aio/store/api"
)

// symbolic replaces IP set names in s by a readable form of their spec:
// {sel} or {sel | ns nsSel} for selectors, {tcp:name @ sel} for named
// ports, {svc ns/name} and {svc+ports ns/name} for services, so expected
// rules can be reviewed by eye.
func symbolic(s string, sets []IPSetSpec) string {
	for _, set := range sets {
		var sym string
		switch set.Kind {
		case IPSetSelector:
			sym = "{" + set.Selector
			if set.NamespaceSelector != "" {
				sym += " | ns " + set.NamespaceSelector
			}
			sym += "}"
		case IPSetNamedPort:
			sym = "{" + set.Protocol + ":" + set.PortName + " @ " + set.Selector
			if set.NamespaceSelector != "" {
				sym += " | ns " + set.NamespaceSelector
			}
			sym += "}"
		case IPSetService:
			sym = "{svc " + set.Service + "}"
		case IPSetServicePorts:
			sym = "{svc+ports " + set.Service + "}"
		default:
			continue
		}
		s = strings.ReplaceAll(s, set.Name, sym)
	}
	return s
}

// Marks in the default configuration.
const (
	setAcc  = "-j MARK --set-xmark 0x10000/0x10000"
	retAcc  = "-m mark --mark 0x10000/0x10000 -j RETURN"
	setPass = "-j MARK --set-xmark 0x20000/0x20000"
	retPass = "-m mark --mark 0x20000/0x20000 -j RETURN"
	setScr  = "-j MARK --set-xmark 0x40000/0x40000"
	clrScr  = "-j MARK --set-xmark 0x0/0x40000"
	ifScr   = "-m mark --mark 0x40000/0x40000"
	logRule = `-j LOG --log-prefix "calico-packet: " --log-level 5`
)

const (
	allow = api.ActionAllow
	deny  = api.ActionDeny
)

// featureCases are single rules with their expected rendering (IP set
// names shown symbolically).
var featureCases = []struct {
	name string
	v    int
	ns   string
	rule api.Rule
	want string
}{
	{"allow all", 4, "", api.Rule{Action: allow}, lines(setAcc, retAcc)},
	{"deny all", 4, "", api.Rule{Action: deny}, lines("-j DROP")},
	{"pass", 4, "", api.Rule{Action: api.ActionPass, Protocol: proto("TCP")},
		lines("-p tcp "+setPass, retPass)},
	{"log", 4, "", api.Rule{Action: api.ActionLog, Protocol: proto("UDP")}, lines("-p udp " + logRule)},
	{"unknown action left out", 4, "", api.Rule{Action: "Bogus"}, ""},
	{"http match fails closed: allow left out", 4, "", api.Rule{Action: allow, HTTP: &api.HTTPMatch{Methods: []string{"GET"}}}, ""},
	{"http match fails closed: deny ignores it", 4, "", api.Rule{Action: deny, HTTP: &api.HTTPMatch{Methods: []string{"GET"}}}, lines("-j DROP")},

	// Protocols.
	{"tcp", 4, "", api.Rule{Action: deny, Protocol: proto("TCP")}, lines("-p tcp -j DROP")},
	{"numeric protocol", 4, "", api.Rule{Action: deny, Protocol: protoNum(47)}, lines("-p 47 -j DROP")},
	{"numeric tcp uses name", 4, "", api.Rule{Action: deny, Protocol: protoNum(6)}, lines("-p tcp -j DROP")},
	{"sctp", 4, "", api.Rule{Action: deny, Protocol: proto("SCTP")}, lines("-p sctp -j DROP")},
	{"protocol makes another notProtocol moot", 4, "", api.Rule{Action: deny, Protocol: proto("UDPLite"), NotProtocol: proto("TCP")},
		lines("-p udplite -j DROP")},
	{"protocol and the same notProtocol never match", 4, "", api.Rule{Action: deny, Protocol: proto("TCP"), NotProtocol: protoNum(6)}, ""},
	{"notProtocol", 4, "", api.Rule{Action: deny, NotProtocol: proto("UDP")}, lines("! -p udp -j DROP")},
	{"icmpv6 left out of v4", 4, "", api.Rule{Action: deny, Protocol: proto("ICMPv6")}, ""},
	{"icmp left out of v6", 6, "", api.Rule{Action: deny, Protocol: proto("ICMP")}, ""},
	{"icmpv6 in v6", 6, "", api.Rule{Action: deny, Protocol: proto("ICMPv6")}, lines("-p ipv6-icmp -j DROP")},

	// ICMP type and code.
	{"icmp type/code", 4, "", api.Rule{Action: deny, Protocol: proto("ICMP"), ICMP: &api.ICMPFields{Type: intp(8), Code: intp(0)}},
		lines("-p icmp -m icmp --icmp-type 8/0 -j DROP")},
	{"icmp type, not type", 4, "", api.Rule{Action: deny, Protocol: proto("ICMP"),
		ICMP: &api.ICMPFields{Type: intp(3)}, NotICMP: &api.ICMPFields{Type: intp(3), Code: intp(4)}},
		lines("-p icmp -m icmp --icmp-type 3 -m icmp ! --icmp-type 3/4 -j DROP")},
	{"icmpv6 type", 6, "", api.Rule{Action: deny, Protocol: proto("ICMPv6"), ICMP: &api.ICMPFields{Type: intp(128)}},
		lines("-p ipv6-icmp -m icmp6 --icmpv6-type 128 -j DROP")},
	{"icmp fields ignored without icmp protocol", 4, "", api.Rule{Action: deny, Protocol: proto("TCP"), NotICMP: &api.ICMPFields{Type: intp(8)}},
		lines("-p tcp -j DROP")},

	// IP version.
	{"ipVersion 6 left out of v4", 4, "", api.Rule{Action: deny, IPVersion: intp(6)}, ""},
	{"ipVersion 6 in v6", 6, "", api.Rule{Action: deny, IPVersion: intp(6)}, lines("-j DROP")},

	// Ports.
	{"ports and range", 4, "", api.Rule{Action: allow, Protocol: proto("TCP"),
		Destination: api.EntityRule{Ports: portList("80", "443", "8000:8080")}},
		lines("-p tcp -m multiport --dports 80,443,8000:8080 "+setAcc, retAcc)},
	{"source and destination ports multiply", 4, "", api.Rule{Action: deny, Protocol: proto("UDP"),
		Source: api.EntityRule{Ports: portList("53", "http")}, Destination: api.EntityRule{NotPorts: portList("1:1023")}},
		lines("-p udp -m multiport --sports 53 -m multiport ! --dports 1:1023 -j DROP",
			"-p udp -m set --match-set {udp:http @ all()} src,src -m multiport ! --dports 1:1023 -j DROP")},
	{"ports without a port protocol never match", 4, "", api.Rule{Action: allow, Destination: api.EntityRule{Ports: portList("80")}}, ""},
	{"notPorts without a port protocol are moot", 4, "", api.Rule{Action: deny, Destination: api.EntityRule{NotPorts: portList("80")}},
		lines("-j DROP")},

	// Named ports.
	{"named and numeric ports", 4, "prod", api.Rule{Action: allow, Protocol: proto("TCP"),
		Destination: api.EntityRule{Selector: "app == 'db'", Ports: portList("5432", "metrics")}},
		lines(`-p tcp -m set --match-set {app == "db" && projectcalico.org/namespace == "prod"} dst -m multiport --dports 5432 `+setAcc,
			`-p tcp -m set --match-set {app == "db" && projectcalico.org/namespace == "prod"} dst -m set --match-set {tcp:metrics @ app == "db" && projectcalico.org/namespace == "prod"} dst,dst `+setAcc,
			retAcc)},
	{"negated named port", 4, "", api.Rule{Action: deny, Protocol: proto("SCTP"),
		Destination: api.EntityRule{NotPorts: portList("diameter", "3868")}},
		lines("-p sctp -m multiport ! --dports 3868 -m set ! --match-set {sctp:diameter @ all()} dst,dst -j DROP")},

	// Nets.
	{"one net each side", 4, "", api.Rule{Action: deny,
		Source: api.EntityRule{Nets: []string{"10.1.0.0/16"}}, Destination: api.EntityRule{NotNets: []string{"10.2.3.4/32"}}},
		lines("-s 10.1.0.0/16 ! -d 10.2.3.4/32 -j DROP")},
	{"nets are canonical", 4, "", api.Rule{Action: deny, Source: api.EntityRule{Nets: []string{"10.1.2.3/16", "10.9.9.9"}}},
		lines("-s 10.1.0.0/16 -j DROP", "-s 10.9.9.9/32 -j DROP")},
	{"several nets multiply", 4, "", api.Rule{Action: allow,
		Source: api.EntityRule{Nets: []string{"10.1.0.0/16", "10.2.0.0/16"}}, Destination: api.EntityRule{Nets: []string{"192.168.0.0/24", "192.168.1.0/24"}}},
		lines("-s 10.1.0.0/16 -d 192.168.0.0/24 "+setAcc, "-s 10.1.0.0/16 -d 192.168.1.0/24 "+setAcc,
			"-s 10.2.0.0/16 -d 192.168.0.0/24 "+setAcc, "-s 10.2.0.0/16 -d 192.168.1.0/24 "+setAcc, retAcc)},
	{"several notNets use the scratch mark", 4, "", api.Rule{Action: allow,
		Source: api.EntityRule{NotNets: []string{"10.1.0.0/16", "10.2.0.0/16", "10.3.0.0/16"}}},
		lines("! -s 10.1.0.0/16 "+setScr, "-s 10.2.0.0/16 "+clrScr, "-s 10.3.0.0/16 "+clrScr,
			ifScr+" -j MARK --set-xmark 0x10000/0x50000", retAcc)},
	{"nets with notNets use the scratch mark", 4, "", api.Rule{Action: deny,
		Source: api.EntityRule{Nets: []string{"10.0.0.0/8"}, NotNets: []string{"10.1.0.0/16"}}},
		lines("-s 10.0.0.0/8 "+setScr, "-s 10.1.0.0/16 "+clrScr, ifScr+" -j DROP")},
	{"pass with scratch", 4, "", api.Rule{Action: api.ActionPass,
		Destination: api.EntityRule{Nets: []string{"10.0.0.0/8"}, NotNets: []string{"10.1.0.0/16"}}},
		lines("-d 10.0.0.0/8 "+setScr, "-d 10.1.0.0/16 "+clrScr, ifScr+" -j MARK --set-xmark 0x20000/0x60000", retPass)},
	{"log with several alternatives logs once", 4, "", api.Rule{Action: api.ActionLog,
		Source: api.EntityRule{Nets: []string{"10.1.0.0/16", "10.2.0.0/16"}}},
		lines("-s 10.1.0.0/16 "+setScr, "-s 10.2.0.0/16 "+setScr, ifScr+" "+logRule, clrScr)},
	{"nets of the other version: rule left out", 4, "", api.Rule{Action: allow, Source: api.EntityRule{Nets: []string{"fd00::/64"}}}, ""},
	{"notNets of the other version ignored", 6, "", api.Rule{Action: deny, Source: api.EntityRule{NotNets: []string{"10.0.0.0/8", "fd00::/64"}}},
		lines("! -s fd00::/64 -j DROP")},
	{"mixed nets keep this version's", 6, "", api.Rule{Action: deny, Destination: api.EntityRule{Nets: []string{"10.0.0.0/8", "fd00::1"}}},
		lines("-d fd00::1/128 -j DROP")},

	// Selectors.
	{"global selector as is", 4, "", api.Rule{Action: allow, Source: api.EntityRule{Selector: "role=='x'"}},
		lines(`-m set --match-set {role == "x"} src `+setAcc, retAcc)},
	{"namespaced selector restricted", 4, "prod", api.Rule{Action: allow, Source: api.EntityRule{Selector: "a == 'b' || c == 'd'"}},
		lines(`-m set --match-set {(a == "b" || c == "d") && projectcalico.org/namespace == "prod"} src `+setAcc, retAcc)},
	{"namespaced notSelector", 4, "prod", api.Rule{Action: deny, Destination: api.EntityRule{NotSelector: "app == 'x'"}},
		lines(`-m set --match-set {projectcalico.org/namespace == "prod"} dst -m set ! --match-set {app == "x"} dst -j DROP`)},
	{"namespaced nets only: not restricted", 4, "prod", api.Rule{Action: deny, Source: api.EntityRule{Nets: []string{"10.0.0.0/8"}}},
		lines("-s 10.0.0.0/8 -j DROP")},
	{"namespaceSelector replaces the namespace", 4, "prod", api.Rule{Action: allow,
		Source: api.EntityRule{Selector: "app == 'x'", NamespaceSelector: "team == 'a'"}},
		lines(`-m set --match-set {app == "x" | ns team == "a"} src `+setAcc, retAcc)},
	{"global namespaceSelector alone selects all in namespaces", 4, "", api.Rule{Action: allow,
		Source: api.EntityRule{NamespaceSelector: "team == 'a'"}},
		lines(`-m set --match-set {all() | ns team == "a"} src `+setAcc, retAcc)},
	{"service account names", 4, "prod", api.Rule{Action: allow,
		Source: api.EntityRule{ServiceAccounts: &api.ServiceAccountMatch{Names: []string{"b", "a"}}}},
		lines(`-m set --match-set {projectcalico.org/serviceaccount in {"a", "b"} && projectcalico.org/namespace == "prod"} src `+setAcc, retAcc)},

	// Services: a source matches the endpoints' addresses, a destination
	// their address,protocol:port entries; the namespace defaults to the
	// policy's.
	{"destination services: addresses with ports", 4, "", api.Rule{Action: allow,
		Destination: api.EntityRule{Services: &api.ServiceMatch{Name: "kube-dns", Namespace: "kube-system"}}},
		lines(`-m set --match-set {svc+ports kube-system/kube-dns} dst,dst `+setAcc, retAcc)},
	{"destination services with a protocol, deny", 6, "", api.Rule{Action: deny, Protocol: proto("UDP"),
		Destination: api.EntityRule{Services: &api.ServiceMatch{Name: "kube-dns", Namespace: "kube-system"}}},
		lines(`-p udp -m set --match-set {svc+ports kube-system/kube-dns} dst,dst -j DROP`)},
	{"source services default to the policy's namespace, ports still apply", 4, "prod", api.Rule{Action: allow, Protocol: proto("TCP"),
		Source:      api.EntityRule{Services: &api.ServiceMatch{Name: "web"}},
		Destination: api.EntityRule{Ports: portList("80")}},
		lines(`-p tcp -m set --match-set {svc prod/web} src -m multiport --dports 80 `+setAcc, retAcc)},
	{"source services in another namespace", 4, "prod", api.Rule{Action: deny,
		Source: api.EntityRule{Services: &api.ServiceMatch{Name: "web", Namespace: "shop"}}},
		lines(`-m set --match-set {svc shop/web} src -j DROP`)},
}

func TestRuleFeatures(t *testing.T) {
	for _, tc := range featureCases {
		t.Run(tc.name, func(t *testing.T) {
			got, sets := renderRule(t, tc.v, tc.ns, tc.rule)
			if got := symbolic(got, sets); got != tc.want {
				t.Errorf("got:\n%swant:\n%s", got, tc.want)
			}
		})
	}
}

func TestPortsSplitAt15(t *testing.T) {
	var ps []string
	for p := 1; p <= 20; p++ {
		ps = append(ps, strconv.Itoa(1000+p))
	}
	got, _ := renderRule(t, 4, "", api.Rule{Action: api.ActionDeny, Protocol: proto("TCP"), Destination: api.EntityRule{Ports: portList(ps...)}})
	want := lines(
		"-p tcp -m multiport --dports 1001,1002,1003,1004,1005,1006,1007,1008,1009,1010,1011,1012,1013,1014,1015 -j DROP",
		"-p tcp -m multiport --dports 1016,1017,1018,1019,1020 -j DROP")
	if got != want {
		t.Errorf("got:\n%swant:\n%s", got, want)
	}
	// A range counts twice: 7 ranges (14) + 1 port fill one match; the
	// next range starts a new one.
	got, _ = renderRule(t, 4, "", api.Rule{Action: api.ActionDeny, Protocol: proto("UDP"), Source: api.EntityRule{NotPorts: portList(
		"1:2", "3:4", "5:6", "7:8", "9:10", "11:12", "13:14", "15", "16:17")}})
	want = lines("-p udp -m multiport ! --sports 1:2,3:4,5:6,7:8,9:10,11:12,13:14,15 -m multiport ! --sports 16:17 -j DROP")
	if got != want {
		t.Errorf("got:\n%swant:\n%s", got, want)
	}
}

func TestIPSetSpecsOfRules(t *testing.T) {
	_, sets := renderRule(t, 6, "prod", api.Rule{Action: api.ActionAllow, Protocol: proto("TCP"),
		Source:      api.EntityRule{Selector: "app == 'a'", NotSelector: "bad == 'true'"},
		Destination: api.EntityRule{Ports: portList("http")}})
	got := dumpSets(sets)
	for _, s := range sets {
		if !strings.HasPrefix(s.Name, "cali60") || len(s.Name) > MaxIPSetName {
			t.Errorf("set name %q", s.Name)
		}
		if s.Name != IPSetName(6, s) {
			t.Errorf("set %q: IPSetName gives %q", s.Name, IPSetName(6, s))
		}
	}
	for _, want := range []string{
		`selector sel=app == "a" && projectcalico.org/namespace == "prod"`,
		`selector sel=bad == "true"`,
		`named-port sel=all() port=tcp/http`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("sets lack %q:\n%s", want, got)
		}
	}
	if len(sets) != 3 {
		t.Errorf("want 3 sets, got:\n%s", got)
	}
}
