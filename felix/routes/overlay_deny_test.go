package routes

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/calico-aio/calico-aio/felix/calc"
	"github.com/calico-aio/calico-aio/felix/dataplane"
	"github.com/calico-aio/calico-aio/iptables"
)

// TestOverlayFilterDenyRules: the overlay's drop of VXLAN and IP-in-IP
// from hosts that are not Calico nodes is REJECT under
// iptablesFilterDenyAction Reject, DROP otherwise, as Calico renders it.
func TestOverlayFilterDenyRules(t *testing.T) {
	for _, reject := range []bool{false, true} {
		des := dataplane.Desired{Tables: map[int]map[string][]iptables.Chain{4: {"filter": {{Name: "cali-INPUT"}, {Name: "cali-OUTPUT"}}}}}
		deny := calc.FilterDeny{Reject: reject}
		nodes := []netip.Addr{netip.MustParseAddr("192.0.2.1")}
		addVXLANFilter(&des, 4, calc.OverlayFamily{Enabled: true, NodeAddrs: nodes, Deny: deny}, 4789)
		addIPIPFilter(&des, calc.IPIPDesired{Enabled: true, NodeAddrs: nodes, Deny: deny})
		want, word := "-j DROP", "Drop "
		if reject {
			want, word = "-j REJECT", "Reject "
		}
		var denies []string
		for _, r := range des.Tables[4]["filter"][0].Rules {
			if r.Action == "-j DROP" || r.Action == "-j REJECT" {
				if r.Action != want || !strings.HasPrefix(r.Comment, word) {
					t.Errorf("Reject %v: %s %s  # %s", reject, r.Match, r.Action, r.Comment)
				}
				denies = append(denies, r.Match)
			}
		}
		if len(denies) != 2 {
			t.Errorf("Reject %v: deny rules %q, want the VXLAN and the IP-in-IP one", reject, denies)
		}
	}
}
