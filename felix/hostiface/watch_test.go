package hostiface

import (
	"net"
	"testing"

	"github.com/calico-aio/calico-aio/felix/dataplane"
)

// TestIfaceWatchFilter: kube-ipvs0 always matters; other interfaces and
// addresses only while the rendering reads host interfaces, and never
// workload interfaces or link-local addresses.
func TestIfaceWatchFilter(t *testing.T) {
	w := NewWatch()
	w.SetWorkload(dataplane.IfacePrefixes{"cali", "tap"})
	for _, needed := range []bool{false, true} {
		w.needed.Store(needed)
		for name, want := range map[string]bool{"kube-ipvs0": true, "eth0": needed, "cali1234": false, "tap0": false} {
			if got := w.linkMatters(name); got != want {
				t.Errorf("needed %v: link %s matters %v, want %v", needed, name, got, want)
			}
		}
		for addr, want := range map[string]bool{"192.0.2.7": needed, "2001:db8::7": needed, "fe80::1": false, "169.254.1.1": false} {
			if got := w.addrMatters(net.ParseIP(addr)); got != want {
				t.Errorf("needed %v: address %s matters %v, want %v", needed, addr, got, want)
			}
		}
	}
	w.signal()
	w.signal() // coalesced, never blocks
	if len(w.C) != 1 {
		t.Fatalf("%d signals queued, want 1", len(w.C))
	}
}
