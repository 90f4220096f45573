package bgp

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"sync"
	"testing"
	"time"

	api "github.com/osrg/gobgp/v3/api"
)

// helperSpec configures a speaker in a helper process. A graceful restart
// needs a real process exit: only then do the sessions close without a Cease.
type helperSpec struct {
	Node       int
	Port       int
	Restarting bool
	Prefixes   []netip.Prefix
	Peer       Peer
}

// helperMsg is one JSON line from the helper's stdout.
type helperMsg struct {
	Ready bool
	Route *RouteEvent
}

// TestHelperSpeaker is not a test: it is the body of a helper process (see
// startHelper). It runs a speaker until told on stdin to stop
// ("stop-graceful" or "stop") or until stdin closes.
func TestHelperSpeaker(t *testing.T) {
	raw := os.Getenv(envHelper)
	if raw == "" {
		return
	}
	var h helperSpec
	if err := json.Unmarshal([]byte(raw), &h); err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		os.Exit(2)
	}
	s := New(Config{
		RouterID: nodeAddr(h.Node), ASN: 64512, ListenPort: h.Port, ListenAddrs: []netip.Addr{nodeAddr(h.Node)},
		GracefulRestart: true, Restarting: h.Restarting, Logger: testLogger(), LogLevel: testLogLevel(),
	})
	var mu sync.Mutex
	enc := json.NewEncoder(os.Stdout)
	say := func(m helperMsg) { mu.Lock(); defer mu.Unlock(); _ = enc.Encode(m) }
	fail := func(err error) { fmt.Fprintln(os.Stderr, "helper:", err); os.Exit(2) }
	if err := s.Start(t.Context()); err != nil {
		fail(err)
	}
	go func() {
		for batch := range s.Routes() {
			for _, ev := range batch {
				say(helperMsg{Route: &ev})
			}
		}
	}()
	// Originate before adding peers, so the first update and EOR carry them.
	if err := s.SetAdvertisements(h.Prefixes); err != nil {
		fail(err)
	}
	if err := s.SetPeers([]Peer{h.Peer}); err != nil {
		fail(err)
	}
	say(helperMsg{Ready: true})
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		switch sc.Text() {
		case "stop-graceful":
			s.Stop(true)
			os.Exit(0)
		case "stop":
			s.Stop(false)
			os.Exit(0)
		}
	}
	os.Exit(0) // parent gone: die like a crash
}

type helper struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	got   *collector
	ready chan struct{}
}

func startHelper(t *testing.T, spec helperSpec) *helper {
	t.Helper()
	raw, err := json.Marshal(spec)
	must(t, err)
	exe, err := os.Executable()
	must(t, err)
	cmd := exec.Command(exe, "-test.run=^TestHelperSpeaker$")
	cmd.Env = append(os.Environ(), envHelper+"="+string(raw))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	must(t, err)
	stdout, err := cmd.StdoutPipe()
	must(t, err)
	must(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })

	ch := make(chan []RouteEvent)
	h := &helper{cmd: cmd, stdin: stdin, got: newCollector(ch), ready: make(chan struct{})}
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var m helperMsg
			if json.Unmarshal(sc.Bytes(), &m) != nil {
				continue // not ours (test framework output)
			}
			if m.Ready {
				close(h.ready)
			}
			if m.Route != nil {
				ch <- []RouteEvent{*m.Route}
			}
		}
	}()
	select {
	case <-h.ready:
	case <-time.After(10 * time.Second):
		t.Fatal("helper speaker did not start")
	}
	return h
}

// stop sends a stop command and waits for the process to exit.
func (h *helper) stop(t *testing.T, cmd string) {
	t.Helper()
	_, err := fmt.Fprintln(h.stdin, cmd)
	must(t, err)
	must(t, h.cmd.Wait())
}

// TestGracefulRestart: A (a helper process) stops with Stop(true) and starts
// again with Restarting; B keeps A's route the whole time (no withdraw event),
// gets End-of-RIB and drops the stale mark. A final non-graceful stop does
// withdraw, so the retention was graceful restart at work.
func TestGracefulRestart(t *testing.T) {
	needNetns(t)
	port := nextPort()
	gr := func(c *Config) { c.GracefulRestart = true }
	b := startNode(t, 2, port, true, gr)
	must(t, b.SetAdvertisements(prefixes("10.65.21.0/26")))
	aAddr := nodeAddr(1)
	must(t, b.SetPeers([]Peer{{Address: aAddr, Port: port, LocalAddress: b.addr, Passive: true, Type: mesh}}))
	spec := helperSpec{Node: 1, Port: port, Prefixes: prefixes("10.65.20.0/26"),
		Peer: Peer{Address: b.addr, Port: port, LocalAddress: aAddr, Type: mesh}}

	a := startHelper(t, spec)
	waitRoute(t, b, "10.65.20.0/26", "10.200.0.1")
	waitFor(t, 10*time.Second, "A learns B's route", func() bool {
		return a.got.hops(netip.MustParsePrefix("10.65.21.0/26")) != nil
	})
	_, mark := b.got.since(0)

	a.stop(t, "stop-graceful")
	down := time.Now()
	waitFor(t, 10*time.Second, "B notices A is gone", func() bool {
		st, _ := peerStatus(b, aAddr)
		return st.State != "Established"
	})
	if st, _ := peerStatus(b, aAddr); st.Info != "Graceful restart: keeping the peer's routes" {
		t.Errorf("B's status for A while restarting: %+v", st)
	}
	if !slices.Contains(staleFlags(t, b, "10.65.20.0/26"), true) {
		t.Error("A's route is not marked stale on B during the restart")
	}

	spec.Restarting = true
	a = startHelper(t, spec)
	st := waitEstablished(t, b, aAddr, 30*time.Second)
	t.Logf("session back %v after the stop", time.Since(down))
	waitFor(t, 10*time.Second, "End-of-RIB from A and stale routes refreshed", func() bool {
		st, _ = peerStatus(b, aAddr)
		return st.EndOfRIB && slices.Equal(staleFlags(t, b, "10.65.20.0/26"), []bool{false})
	})
	waitFor(t, 10*time.Second, "restarted A learns B's route", func() bool {
		return a.got.hops(netip.MustParsePrefix("10.65.21.0/26")) != nil
	})
	evs, mark := b.got.since(mark)
	for _, ev := range evs {
		if len(ev.NextHops) == 0 {
			t.Errorf("B reported a withdraw during the graceful restart: %+v", ev)
		}
	}

	a.stop(t, "stop")
	waitRoute(t, b, "10.65.20.0/26")
	if evs, _ := b.got.since(mark); len(evs) != 1 {
		t.Errorf("events after a non-graceful stop: %+v", evs)
	}
}

// staleFlags lists the stale flag of each path B's RIB has for p.
func staleFlags(t *testing.T, n *node, p string) []bool {
	var out []bool
	req := &api.ListPathRequest{TableType: api.TableType_GLOBAL,
		Family:   &api.Family{Afi: api.Family_AFI_IP, Safi: api.Family_SAFI_UNICAST},
		Prefixes: []*api.TableLookupPrefix{{Prefix: p}}}
	must(t, n.srv.ListPath(t.Context(), req, func(d *api.Destination) {
		for _, path := range d.GetPaths() {
			out = append(out, path.GetStale())
		}
	}))
	return out
}
