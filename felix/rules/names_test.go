package rules

import (
	"strings"
	"testing"

	"github.com/calico-aio/calico-aio/store/selector"
)

func TestChainNames(t *testing.T) {
	long := strings.Repeat("x", 200)
	for _, tc := range []struct{ got, want string }{
		{PolicyChainName(DirIngress, PolicyKey{Namespace: "prod", Name: "web"}), "cali-pi-_AckejMOEUH0jPZY6bV1"},
		{PolicyChainName(DirEgress, PolicyKey{Namespace: "prod", Name: "web"}), "cali-po-_AckejMOEUH0jPZY6bV1"},
		{ProfileChainName(DirIngress, "kns.prod"), "cali-pri-kns.prod"},
		{ProfileChainName(DirEgress, "ksa.prod.default"), "cali-pro-ksa.prod.default"},
		{EndpointChainName("tw", "cali1234567890a"), "cali-tw-cali1234567890a"},
		{EndpointChainName("fw", "cali1234567890a"), "cali-fw-cali1234567890a"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
	// Global and namespaced policies of the same name differ.
	if PolicyChainName(DirIngress, PolicyKey{Name: "web"}) == PolicyChainName(DirIngress, PolicyKey{Namespace: "web"}) {
		t.Error("policy names collide")
	}
	for _, name := range []string{
		PolicyChainName(DirIngress, PolicyKey{Namespace: long, Name: long}),
		ProfileChainName(DirIngress, long),
		ProfileChainName(DirEgress, "kns.a-namespace-with-a-long-name"),
		ProfileChainName(DirEgress, "has space"),
		EndpointChainName("tw", long),
	} {
		if len(name) > MaxChainName || strings.ContainsAny(name, " \t\"'") {
			t.Errorf("bad chain name %q (%d chars)", name, len(name))
		}
	}
	if a, b := ProfileChainName(DirIngress, long), ProfileChainName(DirIngress, long+"y"); a == b {
		t.Errorf("long profile names collide: %q", a)
	}
}

func TestIPSetNames(t *testing.T) {
	sel := IPSetSpec{Kind: IPSetSelector, Selector: "app == 'x'"}
	for _, tc := range []struct {
		v      int
		spec   IPSetSpec
		prefix string
	}{
		{4, sel, "cali40s:"},
		{6, sel, "cali60s:"},
		{4, IPSetSpec{Kind: IPSetSelector, Selector: "app == 'x'", NamespaceSelector: "a == 'b'"}, "cali40s:"},
		{4, IPSetSpec{Kind: IPSetNamedPort, Selector: "all()", PortName: "http", Protocol: "tcp"}, "cali40n:"},
		{6, IPSetSpec{Kind: IPSetNamedPort, Selector: "all()", PortName: "http", Protocol: "udp"}, "cali60n:"},
		{4, IPSetSpec{Kind: IPSetSelector, Selector: "not a selector ((("}, "cali40s:"},
	} {
		name := IPSetName(tc.v, tc.spec)
		if !strings.HasPrefix(name, tc.prefix) || len(name) != MaxIPSetName {
			t.Errorf("%+v: name %q", tc.spec, name)
		}
	}
	for _, tc := range []struct{ got, want string }{
		{IPSetName(4, IPSetSpec{Kind: IPSetPools}), "cali40all-ipam-pools"},
		{IPSetName(4, IPSetSpec{Kind: IPSetPools, NATOutgoing: true}), "cali40masq-ipam-pools"},
		{IPSetName(6, IPSetSpec{Kind: IPSetPools}), "cali60all-ipam-pools"},
		{IPSetName(6, IPSetSpec{Kind: IPSetPools, NATOutgoing: true}), "cali60masq-ipam-pools"},
		// Equivalent selectors share a set: the hash is of the canonical form.
		{IPSetName(4, sel), IPSetName(4, IPSetSpec{Kind: IPSetSelector, Selector: ` app=="x" `})},
		// The plain selector set is the selector's UniqueID prefix.
		{IPSetName(4, sel), "cali40s:" + selector.MustParse("app == 'x'").UniqueID()[:23]},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
	distinct := map[string]bool{}
	for _, s := range []IPSetSpec{
		sel,
		{Kind: IPSetSelector, Selector: "app == 'x'", NamespaceSelector: "a == 'b'"},
		{Kind: IPSetSelector, Selector: "app == 'x'", NamespaceSelector: "a == 'c'"},
		{Kind: IPSetNamedPort, Selector: "app == 'x'", PortName: "http", Protocol: "tcp"},
		{Kind: IPSetNamedPort, Selector: "app == 'x'", PortName: "http", Protocol: "udp"},
		{Kind: IPSetNamedPort, Selector: "app == 'x'", PortName: "https", Protocol: "tcp"},
	} {
		distinct[IPSetName(4, s)] = true
	}
	if len(distinct) != 6 {
		t.Errorf("names collide: %v", distinct)
	}
}
