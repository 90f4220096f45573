package peering

import (
	"log/slog"
	"net/netip"
	"testing"

	"github.com/calico-aio/calico-aio/bgp"
	"github.com/calico-aio/calico-aio/felix/dataplane"
	"github.com/calico-aio/calico-aio/store/api"
)

// localASNumber is the AS a node presents to the peer: the forward peering
// carries it as the speaker's LocalASN, and the Calico node on the remote
// side peers back expecting that AS, not the node's own.
func TestDesiredPeersLocalASNumber(t *testing.T) {
	nodes := []*api.Node{testNode(1, nil, ""), testNode(2, nil, "")}
	bp := &api.BGPPeer{}
	bp.Metadata.Name = "n1-n2"
	local := api.ASNumber(64700)
	bp.Spec.Node, bp.Spec.PeerIP, bp.Spec.LocalASNumber = "node1", "10.0.0.2", &local

	b1 := testBGPState("node1", nodes...)
	b1.peers[bp.Metadata.Name] = bp
	p := peerMap(b1.desiredPeers(179))["10.0.0.2"]
	if p.LocalASN != 64700 || p.ASN != uint32(api.DefaultASNumber) {
		t.Errorf("node1's peer: %+v, want local AS 64700 towards AS %d", p, api.DefaultASNumber)
	}
	b2 := testBGPState("node2", nodes...)
	b2.peers[bp.Metadata.Name] = bp
	p = peerMap(b2.desiredPeers(179))["10.0.0.1"]
	if p.ASN != 64700 || p.LocalASN != 0 {
		t.Errorf("node2's reverse peer: %+v, want node1 as AS 64700", p)
	}
}

// reversePeering Manual: the remote node does not peer back by itself.
func TestDesiredPeersReversePeeringManual(t *testing.T) {
	nodes := []*api.Node{testNode(1, nil, ""), testNode(2, nil, "")}
	bp := &api.BGPPeer{}
	bp.Metadata.Name = "n1-n2"
	bp.Spec.Node, bp.Spec.PeerIP = "node1", "10.0.0.2"
	for _, mode := range []string{"", api.ReversePeeringAuto, api.ReversePeeringManual} {
		bp.Spec.ReversePeering = mode
		b1, b2 := testBGPState("node1", nodes...), testBGPState("node2", nodes...)
		b1.peers[bp.Metadata.Name], b2.peers[bp.Metadata.Name] = bp, bp
		if _, ok := peerMap(b1.desiredPeers(179))["10.0.0.2"]; !ok {
			t.Errorf("%q: node1 lost its forward peering", mode)
		}
		_, back := peerMap(b2.desiredPeers(179))["10.0.0.1"]
		if back != (mode != api.ReversePeeringManual) {
			t.Errorf("reversePeering %q: node2 peers back = %v", mode, back)
		}
	}
}

// BGPConfiguration node.<name> listenPort is that node's port: the node
// listens on it and its peers dial it; other nodes keep the default's.
func TestListenPortPerNode(t *testing.T) {
	nodes := []*api.Node{testNode(1, nil, ""), testNode(2, nil, ""), testNode(3, nil, "")}
	b := testBGPState("node1", nodes...)
	on := true
	b.configs["default"].Spec.NodeToNodeMeshEnabled = &on
	b.configs["default"].Spec.ListenPort = 1790
	b.configs["node.node2"] = &api.BGPConfiguration{Spec: api.BGPConfigurationSpec{ListenPort: 1791}}
	got := peerMap(b.desiredPeers(179))
	if got["10.0.0.2"].Port != 1791 || got["10.0.0.3"].Port != 1790 || b.listenPort(179) != 1790 {
		t.Errorf("ports: node2 %d node3 %d own %d; want 1791 1790 1790", got["10.0.0.2"].Port, got["10.0.0.3"].Port, b.listenPort(179))
	}
	b.configs["node.node1"] = &api.BGPConfiguration{Spec: api.BGPConfigurationSpec{ListenPort: 1792}}
	if b.listenPort(179) != 1792 || peerMap(b.desiredPeers(179))["10.0.0.3"].Port != 1790 {
		t.Errorf("node1's own port %d, want 1792 (node3 still 1790)", b.listenPort(179))
	}
	// A BGPPeer whose peerIP (no port) is a Calico node dials that node's
	// listenPort; an external peer gets our own port.
	off := false
	b.configs["default"].Spec.NodeToNodeMeshEnabled = &off
	for name, ip := range map[string]string{"to-node2": "10.0.0.2", "external": "192.0.2.1"} {
		bp := &api.BGPPeer{}
		bp.Metadata.Name = name
		bp.Spec.Node, bp.Spec.PeerIP, bp.Spec.ASNumber = "node1", ip, 64512
		b.peers[name] = bp
	}
	got = peerMap(b.desiredPeers(179))
	if got["10.0.0.2"].Port != 1791 || got["192.0.2.1"].Port != 1792 {
		t.Errorf("BGPPeer ports: node2 %d, external %d; want 1791, 1792", got["10.0.0.2"].Port, got["192.0.2.1"].Port)
	}
}

// BGPConfiguration logSeverityScreen is the speaker's level, node.<name>
// over default, and a change reaches the running speaker at the next sync.
func TestBGPLogSeverityLive(t *testing.T) {
	b := testBGPState("node1", testNode(1, nil, ""))
	if b.logLevel() != slog.LevelInfo {
		t.Errorf("default level %v, want Info", b.logLevel())
	}
	b.configs["default"].Spec.LogSeverityScreen = "Debug"
	if b.logLevel() != slog.LevelDebug {
		t.Errorf("default Debug: %v", b.logLevel())
	}
	b.configs["node.node1"] = &api.BGPConfiguration{Spec: api.BGPConfigurationSpec{LogSeverityScreen: "Warning"}}
	if b.logLevel() != slog.LevelWarn {
		t.Errorf("node.node1 Warning: %v", b.logLevel())
	}
	b.configs["node.node2"] = &api.BGPConfiguration{Spec: api.BGPConfigurationSpec{LogSeverityScreen: "Error"}}
	if b.logLevel() != slog.LevelWarn {
		t.Errorf("another node's setting applied: %v", b.logLevel())
	}

	// Live: a sync with a changed object changes the running speaker's level.
	r := &Runner{cfg: Config{NodeName: "node1", Port: -1}, self: netip.MustParsePrefix("10.0.0.1/24")}
	routes := map[netip.Prefix]dataplane.RouteTarget{}
	if err := r.Sync(t.Context(), b, routes); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.speaker.Stop(false) })
	if got := r.speaker.Config().LogLevel; got != slog.LevelWarn {
		t.Errorf("speaker started at %v, want Warn", got)
	}
	sp := r.speaker
	b.configs["node.node1"].Spec.LogSeverityScreen = "Debug"
	if err := r.Sync(t.Context(), b, routes); err != nil {
		t.Fatal(err)
	}
	if r.speaker != sp || r.speaker.LogLevel() != slog.LevelDebug {
		t.Errorf("after the change: level %v (same speaker %v), want Debug on the same speaker", r.speaker.LogLevel(), r.speaker == sp)
	}
}

// CALICO_ROUTER_ID: empty is the node's address, an IPv4 address is used
// as is, "hash" is Calico's hash of the node name; anything else is refused
// at start.
func TestBGPRouterIDForms(t *testing.T) {
	node := netip.MustParseAddr("10.0.0.1")
	for _, c := range []struct{ setting, name, want string }{
		{"", "n1", "10.0.0.1"},
		{"192.0.2.9", "n1", "192.0.2.9"},
		// sha256("node1") starts ca12f31b; sha256("a1") f55ff16f: above
		// 223 the first octet is lowered by 32 (0xf5 = 245 -> 213).
		{"hash", "node1", "202.18.243.27"},
		{"hash", "a1", "213.95.241.111"},
	} {
		got, err := RouterID(c.setting, c.name, node)
		if err != nil || got.String() != c.want {
			t.Errorf("%q for %s: %v, %v; want %s", c.setting, c.name, got, err, c.want)
		}
	}
	for _, bad := range []string{"fd00::1", "nope", "10.0.0.256"} {
		if _, err := RouterID(bad, "n1", node); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// A change of AS, listen port or router ID replaces the speaker (sync
// does it, no agent restart); the learned routes are held meanwhile, and a
// withdrawal of a held route waits for the hold to end.
func TestBGPReconfigureHoldsRoutes(t *testing.T) {
	b := testBGPState("node1", testNode(1, nil, ""))
	r := &Runner{cfg: Config{NodeName: "node1", Port: -1}, self: netip.MustParsePrefix("10.0.0.1/24")}
	learned := netip.MustParsePrefix("10.65.1.0/26")
	via := dataplane.RouteTarget{Via: []netip.Addr{netip.MustParseAddr("10.0.0.2")}}
	routes := map[netip.Prefix]dataplane.RouteTarget{learned: via}
	if err := r.Sync(t.Context(), b, routes); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.speaker.Stop(false) })
	first := r.speaker
	if err := r.Sync(t.Context(), b, routes); err != nil || r.speaker != first || r.Holding() {
		t.Fatalf("an unchanged sync replaced the speaker or held routes (err %v)", err)
	}
	asn := api.ASNumber(64600)
	b.configs["default"].Spec.ASNumber = &asn
	if err := r.Sync(t.Context(), b, routes); err != nil {
		t.Fatal(err)
	}
	if r.speaker == first || r.speaker.Config().ASN != 64600 || r.speaker.Config().Restarting {
		t.Errorf("after the AS change: same speaker %v, AS %d, restarting %v", r.speaker == first, r.speaker.Config().ASN, r.speaker.Config().Restarting)
	}
	if !r.Holding() {
		t.Fatal("learned routes not held across the reconfiguration")
	}
	r.ApplyEvents(routes, []bgp.RouteEvent{{Prefix: learned}})
	if len(routes) != 1 || routes[learned].String() != via.String() {
		t.Errorf("a held route was withdrawn: %v", routes)
	}
	// The listen port is shown live by TestClusterBGPLiveASAndPort
	// (a speaker here cannot listen on the test node's address).
	second := r.speaker
	r.cfg.RouterID = "hash"
	if err := r.Sync(t.Context(), b, routes); err != nil {
		t.Fatal(err)
	}
	if c := r.speaker.Config(); r.speaker == second || c.RouterID.String() != "202.18.243.27" {
		t.Errorf("after the router ID change: same speaker %v, router ID %v", r.speaker == second, c.RouterID)
	}
}

// ipv4/ipv6NormalRoutePriority are the metrics of the learned routes the
// agent installs, node.<name> over default; unset leaves the kernel's
// default. (The dataplane programs and changes the metric:
// TestLearnedRouteMetricKernel.)
func TestBGPRoutePriority(t *testing.T) {
	b := testBGPState("node1", testNode(1, nil, ""))
	v4, v6 := netip.MustParsePrefix("10.65.1.0/26"), netip.MustParsePrefix("fd00:65::/122")
	learned := map[netip.Prefix]dataplane.RouteTarget{
		v4: {Via: []netip.Addr{netip.MustParseAddr("10.0.0.2")}},
		v6: {Via: []netip.Addr{netip.MustParseAddr("fd00::2")}},
	}
	metrics := func() (int, int) {
		got := WithPriorities(learned, b)
		return got[v4].Metric, got[v6].Metric
	}
	if m4, m6 := metrics(); m4 != 0 || m6 != 0 {
		t.Errorf("unset: metrics %d, %d; want the kernel's defaults (0)", m4, m6)
	}
	p4, p6, n4 := int32(1024), int32(2048), int32(100)
	b.configs["default"].Spec.IPv4NormalRoutePriority, b.configs["default"].Spec.IPv6NormalRoutePriority = &p4, &p6
	if m4, m6 := metrics(); m4 != 1024 || m6 != 2048 {
		t.Errorf("default 1024/2048: metrics %d, %d", m4, m6)
	}
	b.configs["node.node1"] = &api.BGPConfiguration{Spec: api.BGPConfigurationSpec{IPv4NormalRoutePriority: &n4}}
	if m4, m6 := metrics(); m4 != 100 || m6 != 2048 {
		t.Errorf("node.node1 IPv4 100: metrics %d, %d; want 100, 2048", m4, m6)
	}
	if learned[v4].Metric != 0 {
		t.Error("WithPriorities changed the learned routes themselves")
	}
}

// A change that re-creates a session (here the peer node's AS) holds the
// learned routes until the session is back, on the same speaker.
func TestBGPPeerChangeHoldsRoutes(t *testing.T) {
	b := testBGPState("node2", testNode(1, nil, ""), testNode(2, nil, ""))
	on := true
	b.configs["default"].Spec.NodeToNodeMeshEnabled = &on // node2 > node1: passive, it never dials
	r := &Runner{cfg: Config{NodeName: "node2", Port: -1}, self: netip.MustParsePrefix("10.0.0.2/24")}
	learned := netip.MustParsePrefix("10.65.1.0/26")
	routes := map[netip.Prefix]dataplane.RouteTarget{learned: {Via: []netip.Addr{netip.MustParseAddr("10.0.0.1")}}}
	if err := r.Sync(t.Context(), b, routes); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.speaker.Stop(false) })
	sp := r.speaker
	if err := r.Sync(t.Context(), b, routes); err != nil || r.Holding() {
		t.Fatalf("an unchanged sync held routes (err %v)", err)
	}
	asn := api.ASNumber(64700)
	b.nodes["node1"].Spec.BGP.ASNumber = &asn
	if err := r.Sync(t.Context(), b, routes); err != nil {
		t.Fatal(err)
	}
	if !r.Holding() || r.speaker != sp {
		t.Errorf("after node1's AS change: holding %v, same speaker %v; want true, true", r.Holding(), r.speaker == sp)
	}
}
