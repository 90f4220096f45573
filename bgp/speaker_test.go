package bgp

import (
	"maps"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestPair: an active/passive pair exchanges IPv4 and IPv6 (over the IPv4
// session) routes both ways; withdraws, the import filter, our own path
// winning and removing a peer all show up as route events.
func TestPair(t *testing.T) {
	needNetns(t)
	port := nextPort()
	a := startNode(t, 1, port, true, nil)
	b := startNode(t, 2, port, true, nil)
	must(t, a.SetAdvertisements(prefixes("10.65.0.0/26", "fd00:65::/122")))
	must(t, b.SetAdvertisements(prefixes("10.65.1.0/26")))
	must(t, a.SetPeers([]Peer{b.peer(a, false, mesh)}))
	must(t, b.SetPeers([]Peer{a.peer(b, true, mesh)})) // higher address passive

	t.Run("established", func(t *testing.T) {
		start := time.Now()
		st := waitEstablished(t, b, a.addr, 10*time.Second)
		waitEstablished(t, a, b.addr, time.Second)
		t.Logf("established in %v", time.Since(start))
		if st.Type != mesh || st.Info != "Established" || time.Since(st.Since) > time.Minute {
			t.Errorf("peer status %+v", st)
		}
	})
	t.Run("routes both ways, IPv6 over IPv4", func(t *testing.T) {
		waitRoute(t, b, "10.65.0.0/26", "10.200.0.1")
		waitRoute(t, b, "fd00:65::/122", "fd00:200::1")
		waitRoute(t, a, "10.65.1.0/26", "10.200.0.2")
		learned, err := b.Learned()
		must(t, err)
		want := map[netip.Prefix][]netip.Addr{
			netip.MustParsePrefix("10.65.0.0/26"):  {netip.MustParseAddr("10.200.0.1")},
			netip.MustParsePrefix("fd00:65::/122"): {netip.MustParseAddr("fd00:200::1")},
		}
		if !maps.EqualFunc(learned, want, slices.Equal) {
			t.Errorf("B learned %v, want %v", learned, want)
		}
	})
	t.Run("import filter", func(t *testing.T) {
		b.SetImportFilter(func(p netip.Prefix) bool { return p.Addr().Is6() || p.Bits() == 26 })
		_, mark := b.got.since(0)
		must(t, a.SetAdvertisements(prefixes("10.65.0.0/26", "fd00:65::/122", "10.66.0.5/32")))
		// A later advertisement is a sentinel: once B reports it, the
		// filtered prefix has been through B's event path.
		must(t, a.SetAdvertisements(prefixes("10.65.0.0/26", "fd00:65::/122", "10.66.0.5/32", "10.65.2.0/26")))
		waitRoute(t, b, "10.65.2.0/26", "10.200.0.1")
		evs, _ := b.got.since(mark)
		for _, ev := range evs {
			if ev.Prefix.Bits() == 32 {
				t.Errorf("filtered prefix reported: %+v", ev)
			}
		}
		learned, err := b.Learned()
		must(t, err)
		if _, ok := learned[netip.MustParsePrefix("10.66.0.5/32")]; ok || len(learned) != 3 {
			t.Errorf("B learned %v, want 3 prefixes without 10.66.0.5/32", learned)
		}
		b.SetImportFilter(nil)
	})
	t.Run("own path wins", func(t *testing.T) {
		waitRoute(t, b, "10.65.2.0/26", "10.200.0.1")
		must(t, b.SetAdvertisements(prefixes("10.65.1.0/26", "10.65.2.0/26")))
		waitRoute(t, b, "10.65.2.0/26") // withdrawn: ours is best
		learned, err := b.Learned()
		must(t, err)
		if _, ok := learned[netip.MustParsePrefix("10.65.2.0/26")]; ok {
			t.Errorf("Learned reports a prefix whose best path is ours: %v", learned)
		}
		must(t, b.SetAdvertisements(prefixes("10.65.1.0/26")))
		waitRoute(t, b, "10.65.2.0/26", "10.200.0.1")
	})
	t.Run("withdraw", func(t *testing.T) {
		must(t, a.SetAdvertisements(prefixes("fd00:65::/122", "10.65.2.0/26")))
		waitRoute(t, b, "10.65.0.0/26")
		must(t, a.SetAdvertisements(prefixes("fd00:65::/122", "10.65.2.0/26"))) // idempotent
	})
	t.Run("remove peer", func(t *testing.T) {
		must(t, b.SetPeers(nil))
		waitRoute(t, b, "10.65.2.0/26")
		waitRoute(t, b, "fd00:65::/122")
		waitRoute(t, a, "10.65.1.0/26")
		if st := b.PeerStatus(); len(st) != 0 {
			t.Errorf("B still reports peers %+v", st)
		}
		learned, err := b.Learned()
		must(t, err)
		if len(learned) != 0 {
			t.Errorf("B still learns %v", learned)
		}
	})
}

// TestRouteReflector: A and C peer only with B, a route reflector with both
// as clients. A's route reaches C with A's next hop; a prefix both A and C
// advertise is ECMP on B; stopping A (non-gracefully) withdraws its routes.
func TestRouteReflector(t *testing.T) {
	needNetns(t)
	port := nextPort()
	a := startNode(t, 1, port, true, nil)
	b := startNode(t, 2, port, true, nil)
	c := startNode(t, 3, port, true, nil)
	must(t, a.SetAdvertisements(prefixes("10.65.10.0/26", "10.96.0.10/32")))
	must(t, c.SetAdvertisements(prefixes("10.65.30.0/26", "10.96.0.10/32")))
	rrClient := func(n *node) Peer {
		p := n.peer(b, true, "global")
		p.RouteReflectorClient, p.ClusterID = true, netip.MustParseAddr("1.0.0.1")
		return p
	}
	must(t, b.SetPeers([]Peer{rrClient(a), rrClient(c)}))
	must(t, a.SetPeers([]Peer{b.peer(a, false, "global")}))
	must(t, c.SetPeers([]Peer{b.peer(c, false, "global")}))
	for _, n := range []*node{a, c} {
		st := waitEstablished(t, b, n.addr, 10*time.Second)
		if st.Type != "global" {
			t.Errorf("peer status %+v", st)
		}
	}

	waitRoute(t, c, "10.65.10.0/26", "10.200.0.1")
	waitRoute(t, a, "10.65.30.0/26", "10.200.0.3")
	waitRoute(t, b, "10.96.0.10/32", "10.200.0.1", "10.200.0.3")
	learned, err := b.Learned()
	must(t, err)
	if got := learned[netip.MustParsePrefix("10.96.0.10/32")]; len(got) != 2 {
		t.Errorf("B learned ECMP next hops %v, want both A and C", got)
	}
	if hops := a.got.hops(netip.MustParsePrefix("10.96.0.10/32")); hops != nil {
		t.Errorf("A reports %v for a prefix it originates", hops)
	}

	must(t, c.SetAdvertisements(prefixes("10.65.30.0/26")))
	waitRoute(t, b, "10.96.0.10/32", "10.200.0.1")

	a.Stop(false)
	waitRoute(t, b, "10.96.0.10/32")
	waitRoute(t, c, "10.65.10.0/26")
}

// TestMD5: a pair with the same password establishes; a pair with different
// passwords does not, so MD5 is really applied. (Without the go:debug line in
// harness_test.go, setting TCP_MD5SIG fails on MPTCP sockets and the good pair
// never comes up.)
func TestMD5(t *testing.T) {
	needNetns(t)
	good, bad := nextPort(), nextPort()
	fast := func(c *Config) { c.ConnectRetry = time.Second }
	a := startNode(t, 1, good, true, nil)
	b := startNode(t, 2, good, true, nil)
	c := startNode(t, 3, bad, true, fast)
	d := startNode(t, 4, bad, true, fast)
	withPassword := func(p Peer, pw string) []Peer { p.Password = pw; return []Peer{p} }
	must(t, a.SetAdvertisements(prefixes("10.65.40.0/26")))
	must(t, c.SetAdvertisements(prefixes("10.65.41.0/26")))
	start := time.Now()
	must(t, a.SetPeers(withPassword(b.peer(a, false, mesh), "s3cret")))
	must(t, b.SetPeers(withPassword(a.peer(b, true, mesh), "s3cret")))
	must(t, c.SetPeers(withPassword(d.peer(c, false, mesh), "s3cret")))
	must(t, d.SetPeers(withPassword(c.peer(d, true, mesh), "wrong")))

	waitEstablished(t, b, a.addr, 10*time.Second)
	waitRoute(t, b, "10.65.40.0/26", "10.200.0.1")
	for time.Since(start) < 5*time.Second {
		if st, _ := peerStatus(d, c.addr); st.State == "Established" {
			t.Fatalf("session with mismatched MD5 passwords established: %+v", st)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if st, _ := peerStatus(c, d.addr); st.State == "Established" || !strings.Contains(st.Info, st.State) {
		t.Errorf("dialing side status %+v", st)
	}
}

// TestValidation needs no namespace: bad input is reported, not applied.
func TestValidation(t *testing.T) {
	if err := New(Config{RouterID: netip.MustParseAddr("fd00::1"), ASN: 1}).Start(t.Context()); err == nil {
		t.Error("IPv6 router ID accepted")
	}
	s := New(Config{RouterID: netip.MustParseAddr("10.0.0.1"), ASN: 64512})
	if err := s.SetAdvertisements(prefixes("10.0.0.0/26")); err == nil {
		t.Error("SetAdvertisements before Start accepted")
	}
	if err := s.SetPeers([]Peer{{Address: netip.MustParseAddr("10.0.0.2")}}); err == nil {
		t.Error("SetPeers before Start accepted")
	}
	if got := (&Speaker{}).PeerStatus(); got != nil {
		t.Errorf("PeerStatus before Start = %v", got)
	}
	for in, want := range map[string]string{"10.1.2.3/24": "10.1.2.0/24", "::ffff:10.1.2.3/120": "10.1.2.0/24", "fd00::1/64": "fd00::/64"} {
		if got, ok := normPrefix(netip.MustParsePrefix(in)); !ok || got.String() != want {
			t.Errorf("normPrefix(%s) = %v, %v; want %s", in, got, ok, want)
		}
	}
	if _, ok := normPrefix(netip.MustParsePrefix("::ffff:0.0.0.0/64")); ok {
		t.Error("normPrefix accepted a mapped prefix shorter than /96")
	}
	if seconds(1500*time.Millisecond) != 2 || seconds(time.Millisecond) != 1 || seconds(0) != 0 {
		t.Error("seconds rounding")
	}
}

// TestValidationRunning checks input errors on a running speaker; it neither
// listens nor dials, so it needs no namespace.
func TestValidationRunning(t *testing.T) {
	s := New(Config{RouterID: netip.MustParseAddr("127.0.0.1"), ASN: 64512, ListenPort: -1, Logger: testLogger()})
	must(t, s.Start(t.Context()))
	defer s.Stop(false)
	err := s.SetAdvertisements(prefixes("10.0.0.0/26", "fd00::/122"))
	if err == nil || !strings.Contains(err.Error(), "NextHopV6") {
		t.Errorf("IPv6 prefix without IPv6 next hop: err = %v", err)
	}
	// Passive: no dialing, so nothing leaves the process even outside a namespace.
	p := Peer{Address: netip.MustParseAddr("10.0.0.2"), Passive: true}
	err = s.SetPeers([]Peer{p, p, {}})
	if err == nil || !strings.Contains(err.Error(), "twice") || !strings.Contains(err.Error(), "without address") {
		t.Errorf("duplicate and empty peers: err = %v", err)
	}
	if st := s.PeerStatus(); len(st) != 1 || st[0].State == "Established" {
		t.Errorf("PeerStatus = %+v, want the one valid peer, not established", st)
	}
	must(t, s.SetPeers(nil))
	must(t, s.SetAdvertisements(nil))
}
