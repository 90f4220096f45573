package bgp

import (
	"bytes"
	"log/slog"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"
)

// A speaker shut down for a reconfiguration ends its sessions so that a
// graceful-restart peer keeps its routes: B never withdraws A's prefix while
// A is replaced by a new speaker (same address and port: Shutdown freed the
// port), and the new session comes up.
func TestShutdownForReconfigureKeepsPeerRoutes(t *testing.T) {
	needNetns(t)
	port := nextPort()
	gr := func(c *Config) { c.GracefulRestart = true }
	a := startNode(t, 1, port, false, gr)
	b := startNode(t, 2, port, true, gr)
	must(t, a.SetAdvertisements(prefixes("10.67.0.0/26")))
	must(t, a.SetPeers([]Peer{b.peer(a, false, mesh)}))
	must(t, b.SetPeers([]Peer{a.peer(b, true, mesh)}))
	waitRoute(t, b, "10.67.0.0/26", "10.200.0.1")
	waitFor(t, 10*time.Second, "End-of-RIB from A", func() bool { st, _ := peerStatus(b, a.addr); return st.EndOfRIB })
	_, mark := b.got.since(0)

	a.Shutdown(t.Context())
	a2 := startNode(t, 1, port, false, gr)
	must(t, a2.SetAdvertisements(prefixes("10.67.0.0/26", "10.67.0.64/26")))
	must(t, a2.SetPeers([]Peer{b.peer(a2, false, mesh)}))
	waitRoute(t, b, "10.67.0.64/26", "10.200.0.1")
	waitEstablished(t, b, a.addr, 10*time.Second)
	evs, _ := b.got.since(mark)
	for _, ev := range evs {
		if ev.Prefix == netip.MustParsePrefix("10.67.0.0/26") && len(ev.NextHops) == 0 {
			t.Errorf("B withdrew A's route while A was reconfigured: %+v", evs)
		}
	}
}

// A changed peer is re-created without the peer dropping our routes: B
// changes its session with A (keepalive), A never withdraws B's prefix, and
// the session comes back. Resets tells beforehand.
func TestChangedPeerKeepsRoutesAtThePeer(t *testing.T) {
	needNetns(t)
	port := nextPort()
	gr := func(c *Config) { c.GracefulRestart = true }
	a := startNode(t, 1, port, true, gr)
	b := startNode(t, 2, port, false, gr)
	must(t, b.SetAdvertisements(prefixes("10.68.0.0/26")))
	must(t, a.SetPeers([]Peer{b.peer(a, false, mesh)}))
	toA := a.peer(b, true, mesh)
	must(t, b.SetPeers([]Peer{toA}))
	waitRoute(t, a, "10.68.0.0/26", "10.200.0.2")
	waitFor(t, 10*time.Second, "End-of-RIB from B", func() bool { st, _ := peerStatus(a, b.addr); return st.EndOfRIB })
	_, mark := a.got.since(0)

	changed := toA
	changed.KeepaliveTime = 3 * time.Second
	if b.Resets([]Peer{toA}) || !b.Resets([]Peer{changed}) {
		t.Errorf("Resets: unchanged %v, changed %v; want false, true", b.Resets([]Peer{toA}), b.Resets([]Peer{changed}))
	}
	down := time.Now()
	must(t, b.SetPeers([]Peer{changed}))
	waitFor(t, 20*time.Second, "the session re-established", func() bool {
		st, _ := peerStatus(a, b.addr)
		return st.State == "Established" && st.Since.After(down)
	})
	must(t, b.SetAdvertisements(prefixes("10.68.0.0/26", "10.68.0.64/26")))
	waitRoute(t, a, "10.68.0.64/26", "10.200.0.2")
	evs, _ := a.got.since(mark)
	for _, ev := range evs {
		if ev.Prefix == netip.MustParsePrefix("10.68.0.0/26") && len(ev.NextHops) == 0 {
			t.Errorf("A withdrew B's route while B re-created the session: %+v", evs)
		}
	}
}

// A peer's LocalASN is the AS presented to it: B expects A as AS 64700, A
// runs as 64512, and the session comes up only with the override.
func TestLocalASN(t *testing.T) {
	needNetns(t)
	port := nextPort()
	a := startNode(t, 1, port, false, nil)
	b := startNode(t, 2, port, false, func(c *Config) { c.ASN = 64600 })
	toB := b.peer(a, false, "global")
	toB.ASN, toB.LocalASN = 64600, 64700
	toA := a.peer(b, true, "global")
	toA.ASN = 64700
	must(t, a.SetPeers([]Peer{toB}))
	must(t, b.SetPeers([]Peer{toA}))
	waitEstablished(t, b, a.addr, 10*time.Second)
}

// syncBuffer is a log sink for concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// SetLogLevel changes which GoBGP messages are logged, live, whatever the
// agent's own handler level is (here Error).
func TestLogLevelLive(t *testing.T) {
	needNetns(t)
	var out syncBuffer
	log := slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelError}))
	a := startNode(t, 1, nextPort(), true, func(c *Config) { c.Logger, c.LogLevel = log, slog.LevelWarn })
	peer := Peer{Address: nodeAddr(7), Passive: true}
	must(t, a.SetPeers([]Peer{peer}))
	must(t, a.SetPeers(nil))
	if strings.Contains(out.String(), "Add a peer configuration") {
		t.Fatalf("GoBGP's Info message logged at level Warn:\n%s", out.String())
	}
	a.SetLogLevel(slog.LevelDebug)
	must(t, a.SetPeers([]Peer{peer}))
	waitFor(t, 5*time.Second, "GoBGP's Info message at level Debug", func() bool {
		return strings.Contains(out.String(), "Add a peer configuration")
	})
}
