package e2e

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/calico-aio/calico-aio/store"
	"github.com/calico-aio/calico-aio/store/api"
)

// Helpers for the multi-node BGP tests (multinode_*_test.go).

// setMesh writes BGPConfiguration default with the node-to-node mesh on or off.
func (c *cluster) setMesh(on bool) {
	c.t.Helper()
	k, _ := api.LookupKind("BGPConfiguration")
	cfg := k.NewObject().(*api.BGPConfiguration)
	cfg.Metadata.Name = "default"
	cfg.Spec.NodeToNodeMeshEnabled = &on
	if _, err := c.cl.ApplyResource(ctxBG, cfg); err != nil {
		c.t.Fatal(err)
	}
}

// addBGPPeer creates a BGPPeer.
func (c *cluster) addBGPPeer(name string, spec api.BGPPeerSpec) {
	c.t.Helper()
	k, _ := api.LookupKind("BGPPeer")
	p := k.NewObject().(*api.BGPPeer)
	p.Metadata.Name, p.Spec = name, spec
	if _, err := c.cl.CreateResource(ctxBG, p); err != nil {
		c.t.Fatal(err)
	}
}

// editNode reads a Node, changes it and writes it back, retrying conflicts
// with the agent's own writes.
func (c *cluster) editNode(name string, change func(*api.Node)) {
	c.t.Helper()
	k, _ := api.LookupKind("Node")
	for range 10 {
		r, err := c.cl.GetResource(ctxBG, k, "", name)
		if err != nil {
			c.t.Fatal(err)
		}
		n := r.(*api.Node)
		change(n)
		_, err = c.cl.UpdateResource(ctxBG, n)
		if errors.Is(err, store.ErrConflict) {
			continue
		}
		if err != nil {
			c.t.Fatal(err)
		}
		return
	}
	c.t.Fatalf("updating node %s: too many conflicts", name)
}

// learned parses the node's BGP-learned kernel routes into prefix -> next
// hops ("a,b" for ECMP).
func (nd *clusterNode) learned() map[netip.Prefix]string {
	return parseRoutes(nd.bgpRoutes())
}

// parseRoutes reads `ip route show` output: prefix -> sorted next hops.
func parseRoutes(out string) map[netip.Prefix]string {
	routes := map[netip.Prefix]string{}
	var last netip.Prefix
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) == 0 {
			continue
		}
		if f[0] == "nexthop" && last.IsValid() { // ECMP continuation line
			if len(f) > 2 && f[1] == "via" {
				routes[last] = joinHop(routes[last], f[2])
			}
			continue
		}
		p, err := netip.ParsePrefix(f[0])
		if err != nil {
			a, aerr := netip.ParseAddr(f[0])
			if aerr != nil {
				continue
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		last = p
		routes[p] = ""
		for i := 1; i+1 < len(f); i++ {
			if f[i] == "via" {
				routes[p] = joinHop(routes[p], f[i+1])
			}
		}
	}
	return routes
}

func joinHop(hops, h string) string {
	if hops == "" {
		return h
	}
	return hops + "," + h
}

// routeVia is nil when the node has a BGP route for prefix via next hop via.
func (nd *clusterNode) routeVia(prefix, via string) func() error {
	p := netip.MustParsePrefix(prefix)
	return func() error {
		routes := nd.learned()
		if got, ok := routes[p]; !ok || got != via {
			return fmt.Errorf("%s: want %s via %s, BGP routes:\n%s", nd.name, p, via, nd.bgpRoutes())
		}
		return nil
	}
}

// noRoute is nil when the node has no BGP route for prefix.
func (nd *clusterNode) noRoute(prefix string) func() error {
	p := netip.MustParsePrefix(prefix)
	return func() error {
		if _, ok := nd.learned()[p]; ok {
			return fmt.Errorf("%s: still has a BGP route for %s:\n%s", nd.name, p, nd.bgpRoutes())
		}
		return nil
	}
}

// blockOf is the /bits prefix holding ip.
func blockOf(ip string, bits int) string {
	return netip.PrefixFrom(netip.MustParseAddr(ip), bits).Masked().String()
}

// kill stops the node's agent at once (SIGKILL: no graceful BGP stop).
func (nd *clusterNode) kill() {
	a := nd.agent
	if a == nil || a.cmd.ProcessState != nil {
		return
	}
	_ = a.cmd.Process.Kill()
	<-a.done
}

// echoServer accepts TCP connections in n and echoes every byte back.
func echoServer(t testing.TB, n ns.NetNS, addr string) {
	t.Helper()
	l := listenTCP(t, n, addr)
	var wg sync.WaitGroup
	t.Cleanup(func() { l.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				buf := make([]byte, 64)
				for {
					n, err := c.Read(buf)
					if err != nil {
						return
					}
					if _, err := c.Write(buf[:n]); err != nil {
						return
					}
				}
			})
		}
	})
}

// pinger is a long-lived TCP connection that sends a byte and reads the
// echo every interval; the first failure ends it.
type pinger struct {
	conn   net.Conn
	stopC  chan struct{}
	done   chan struct{}
	rounds int           // read it once stop has returned
	first  chan struct{} // closed after the first echo
	err    error
}

func startPinger(t testing.TB, from ns.NetNS, addr string, interval, timeout time.Duration) *pinger {
	t.Helper()
	p := &pinger{stopC: make(chan struct{}), done: make(chan struct{}), first: make(chan struct{})}
	mustDo(t, from, func() error {
		var err error
		p.conn, err = net.DialTimeout("tcp", addr, 2*time.Second)
		return err
	})
	go func() {
		defer close(p.done)
		defer p.conn.Close()
		tick := time.NewTicker(interval)
		defer tick.Stop()
		buf := make([]byte, 1)
		for i := 0; ; i++ {
			select {
			case <-p.stopC:
				return
			case <-tick.C:
			}
			_ = p.conn.SetDeadline(time.Now().Add(timeout))
			b := byte('a' + i%26)
			if _, err := p.conn.Write([]byte{b}); err != nil {
				p.err = fmt.Errorf("round %d: write: %w", i, err)
				return
			}
			if _, err := p.conn.Read(buf); err != nil || buf[0] != b {
				p.err = fmt.Errorf("round %d: read %q: %v", i, buf, err)
				return
			}
			if p.rounds++; p.rounds == 1 {
				close(p.first)
			}
		}
	}()
	t.Cleanup(func() { _ = p.stop() })
	return p
}

// stop ends the pinger and returns its first error (nil: every round
// went through).
func (p *pinger) stop() error {
	select {
	case <-p.stopC:
	default:
		close(p.stopC)
	}
	<-p.done
	return p.err
}

// routeWatch samples a node's BGP routes every interval and counts the
// samples where a prefix was missing.
type routeWatch struct {
	stopC   chan struct{}
	done    chan struct{}
	samples int
	missing []string // "t+1.2s: 10.x/26 absent"
}

func watchRoute(nd *clusterNode, prefix string, interval time.Duration) *routeWatch {
	p := netip.MustParsePrefix(prefix)
	w := &routeWatch{stopC: make(chan struct{}), done: make(chan struct{})}
	start := time.Now()
	go func() {
		defer close(w.done)
		for {
			if _, ok := nd.learned()[p]; !ok {
				w.missing = append(w.missing, fmt.Sprintf("t+%.1fs: %s absent on %s", time.Since(start).Seconds(), p, nd.name))
			}
			w.samples++
			select {
			case <-w.stopC:
				return
			case <-time.After(interval):
			}
		}
	}()
	nd.c.t.Cleanup(func() { w.stop() })
	return w
}

func (w *routeWatch) stop() {
	select {
	case <-w.stopC:
	default:
		close(w.stopC)
	}
	<-w.done
}

// statusPeer is one row of `calicoctl node status`.
type statusPeer struct{ typ, state string }

// statusPeers parses the peer rows of `calicoctl node status`.
func statusPeers(out string) map[string]statusPeer {
	rows := map[string]statusPeer{}
	for _, l := range strings.Split(out, "\n") {
		cells := strings.Split(l, "|")
		if len(cells) < 5 {
			continue
		}
		addr := strings.TrimSpace(cells[1])
		if _, err := netip.ParseAddr(addr); err != nil {
			continue
		}
		rows[addr] = statusPeer{typ: strings.TrimSpace(cells[2]), state: strings.TrimSpace(cells[3])}
	}
	return rows
}

// peersAre waits until the node's status lists exactly the given peers
// (address -> type), all up.
func (nd *clusterNode) peersAre(t testing.TB, timeout time.Duration, want map[string]string) string {
	t.Helper()
	var out string
	eventually(t, timeout, nd.name+" BGP peers", func() error {
		var err error
		if out, err = nd.nodeStatus(); err != nil {
			return err
		}
		got := statusPeers(out)
		if len(got) != len(want) {
			return fmt.Errorf("want peers %v:\n%s", want, out)
		}
		for addr, typ := range want {
			if p, ok := got[addr]; !ok || p.typ != typ || p.state != "up" {
				return fmt.Errorf("want %s %s up:\n%s", addr, typ, out)
			}
		}
		return nil
	})
	return out
}
