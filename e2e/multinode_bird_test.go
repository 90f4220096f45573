package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/calico-aio/calico-aio/store/api"
)

// BIRD 2 (Debian's bird2) as a real, independent BGP implementation next to
// the nodes, on the same bridge.

// birdRouter is a BIRD daemon in its own namespace on the cluster bridge.
type birdRouter struct {
	c    *cluster
	ns   ns.NetNS
	ip   string
	sock string
	cmd  *exec.Cmd
	logs *lockedBuffer
	done chan error
}

const birdHost = "200" // BIRD's address on the bridge: <subnet>.200

// needBIRD skips without bird/birdc, except in CI where it is a failure.
func needBIRD(t testing.TB) {
	t.Helper()
	for _, b := range []string{"bird", "birdc"} {
		if _, err := exec.LookPath(b); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s not installed (apt package bird2; CI=true: not skipping)", b)
			}
			t.Skipf("%s not installed (apt package bird2)", b)
		}
	}
}

// startBIRD wires a namespace onto the bridge at <subnet>.200 and runs bird
// in it with the config conf (the caller's protocols after a common head:
// router id, device, and a kernel protocol that installs BGP routes in the
// namespace's main table).
func (c *cluster) startBIRD(conf string) *birdRouter {
	t := c.t
	t.Helper()
	needBIRD(t)
	b := &birdRouter{c: c, ns: newNS(t), ip: c.subnet + "." + birdHost, logs: &lockedBuffer{}, done: make(chan error, 1)}
	mustNS(t, c.br, "ip", "link", "add", "nbird", "type", "veth", "peer", "name", "eth0", "netns", nsName(b.ns))
	mustNS(t, c.br, "ip", "link", "set", "nbird", "master", "br0", "up")
	mustNS(t, b.ns, "ip", "addr", "add", b.ip+"/24", "dev", "eth0")
	mustNS(t, b.ns, "ip", "link", "set", "eth0", "up")

	// A short directory: the control socket path must fit sun_path.
	dir, err := os.MkdirTemp("", "bird")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	b.sock = filepath.Join(dir, "ctl")
	head := fmt.Sprintf(`log stderr all;
router id %s;
protocol device { scan time 1; }
protocol kernel {
	ipv4 { import none; export where source = RTS_BGP; };
}
`, b.ip)
	cfg := filepath.Join(dir, "bird.conf")
	if err := os.WriteFile(cfg, []byte(head+conf), 0o644); err != nil {
		t.Fatal(err)
	}
	b.cmd = exec.Command("bird", "-f", "-c", cfg, "-s", b.sock, "-P", filepath.Join(dir, "pid"))
	b.cmd.Stdout, b.cmd.Stderr = b.logs, b.logs
	done, err := startIn(b.ns, b.cmd)
	if err != nil {
		t.Fatal(err)
	}
	go func() { b.done <- <-done }()
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := b.birdc("show", "protocols", "all")
			routes, _ := b.birdc("show", "route", "all")
			t.Logf("BIRD protocols:\n%s\nBIRD routes:\n%s\nBIRD log:\n%s", out, routes, b.logs.String())
		}
		_ = b.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-b.done:
		case <-time.After(5 * time.Second):
			_ = b.cmd.Process.Kill()
			<-b.done
		}
	})
	eventually(t, 10*time.Second, "BIRD answers on its control socket", func() error {
		select {
		case err := <-b.done:
			b.done <- err
			t.Fatalf("bird exited: %v\n%s", err, b.logs.String())
		default:
		}
		_, err := b.birdc("show", "status")
		return err
	})
	return b
}

// birdc runs a BIRD CLI command.
func (b *birdRouter) birdc(args ...string) (string, error) {
	out, err := exec.Command("birdc", append([]string{"-s", b.sock}, args...)...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("birdc %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// hasRoutes is nil when BIRD's table has every prefix.
func (b *birdRouter) hasRoutes(prefixes ...string) func() error {
	return func() error {
		out, err := b.birdc("show", "route")
		if err != nil {
			return err
		}
		for _, p := range prefixes {
			if !hasLine(out, p+" ") {
				return fmt.Errorf("BIRD has no route for %s:\n%s", p, out)
			}
		}
		return nil
	}
}

// kernelRoutes is nil when BIRD installed every prefix into its namespace.
func (b *birdRouter) kernelRoutes(prefixes ...string) func() error {
	return func() error {
		out, err := inNS(b.ns, "ip", "route", "show", "proto", "bird")
		if err != nil {
			return err
		}
		for _, p := range prefixes {
			if !hasLine(out, p+" via ") {
				return fmt.Errorf("BIRD's kernel has no route for %s:\n%s", p, out)
			}
		}
		return nil
	}
}

// birdPeers is one BIRD protocol per node, from template tmpl.
func (c *cluster) birdPeers(tmpl string, asn int) string {
	var s strings.Builder
	for _, nd := range c.nodes {
		fmt.Fprintf(&s, "protocol bgp %s from %s { neighbor %s as %d; }\n", nd.name, tmpl, nd.ip, asn)
	}
	return s.String()
}

// BIRD as the cluster's external route reflector, mesh off: every node peers
// only with BIRD (global BGPPeer, same AS), BIRD holds every node's block,
// reflects them with the original next hops, and pods across nodes reach
// each other over the reflected routes.
func TestBIRDAsRouteReflector(t *testing.T) {
	needBIRD(t)
	c := newCluster(t, 3, "10.247.0")
	createPool(t, c.cl, "pool", "10.127.0.0/16", 26)
	c.setMesh(false)
	bird := c.startBIRD(fmt.Sprintf(`
template bgp calico {
	local %s as 64512;
	rr client;
	direct; # iBGP is multihop by default; the nodes are on our segment
	connect delay time 1;
	connect retry time 2;
	ipv4 { import all; export where source = RTS_BGP; };
}
`, c.subnet+"."+birdHost) + c.birdPeers("calico", 64512))
	c.addBGPPeer("bird-rr", api.BGPPeerSpec{PeerIP: bird.ip, ASNumber: 64512})
	c.startAll()
	for _, nd := range c.nodes {
		nd.peersAre(t, 30*time.Second, map[string]string{bird.ip: "global"})
	}
	pods := make([]pod, len(c.nodes))
	var blocks []string
	for i, nd := range c.nodes {
		pods[i] = nd.pod("net", "b"+nd.name)
		blocks = append(blocks, blockOf(pods[i].ip, 26))
	}
	eventually(t, 20*time.Second, "BIRD learns every node's block", bird.hasRoutes(blocks...))
	eventually(t, 20*time.Second, "BIRD installs every node's block", bird.kernelRoutes(blocks...))
	for i, nd := range c.nodes {
		for j, other := range c.nodes {
			if i != j {
				eventually(t, 20*time.Second, nd.name+" learns "+other.name+"'s block from BIRD", nd.routeVia(blocks[j], other.ip))
			}
		}
	}
	for i := range pods {
		for j := range pods {
			if i != j {
				eventually(t, 15*time.Second, "pod on "+c.nodes[i].name+" -> pod on "+c.nodes[j].name, reachable(pods[i].ns, pods[j].ip))
			}
		}
	}
	out, _ := bird.birdc("show", "route")
	t.Logf("birdc show route:\n%s", out)
}

// BIRD as a plain eBGP peer of every node (AS 64513), mesh on: BIRD learns
// the nodes' blocks, the nodes learn BIRD's static prefix (inside a disabled
// IPPool, so the import filter accepts it) into the kernel, and a pod
// reaches an address behind BIRD over those routes, answered over the
// routes BIRD learned.
func TestBIRDAsPlainPeer(t *testing.T) {
	needBIRD(t)
	c := newCluster(t, 2, "10.248.0")
	createPool(t, c.cl, "pool", "10.128.0.0/16", 26)
	const birdPrefix, birdAddr = "10.129.200.0/26", "10.129.200.1"
	k, _ := api.LookupKind("IPPool")
	ext := k.NewObject().(*api.IPPool)
	ext.Metadata.Name = "behind-bird"
	ext.Spec.CIDR, ext.Spec.BlockSize, ext.Spec.Disabled = "10.129.200.0/24", 26, true
	if _, err := c.cl.CreateResource(ctxBG, ext); err != nil {
		t.Fatal(err)
	}
	bird := c.startBIRD(fmt.Sprintf(`
protocol static {
	ipv4;
	route %s blackhole;
}
template bgp calico {
	local %s as 64513;
	connect delay time 1;
	connect retry time 2;
	ipv4 { import all; export where source = RTS_STATIC; };
}
`, birdPrefix, c.subnet+"."+birdHost) + c.birdPeers("calico", 64512))
	mustNS(t, bird.ns, "ip", "addr", "add", birdAddr+"/32", "dev", "lo")
	c.addBGPPeer("bird-ebgp", api.BGPPeerSpec{PeerIP: bird.ip, ASNumber: 64513})
	c.startAll()
	n1, n2 := c.nodes[0], c.nodes[1]
	n1.peersAre(t, 30*time.Second, map[string]string{n2.ip: "node-to-node mesh", bird.ip: "global"})
	n2.peersAre(t, 30*time.Second, map[string]string{n1.ip: "node-to-node mesh", bird.ip: "global"})

	p1, p2 := n1.pod("net", "e1"), n2.pod("net", "e2")
	b1, b2 := blockOf(p1.ip, 26), blockOf(p2.ip, 26)
	eventually(t, 20*time.Second, "BIRD learns both nodes' blocks", bird.hasRoutes(b1, b2))
	eventually(t, 20*time.Second, "BIRD installs both nodes' blocks", bird.kernelRoutes(b1, b2))
	for _, nd := range c.nodes {
		eventually(t, 20*time.Second, nd.name+" learns BIRD's prefix", nd.routeVia(birdPrefix, bird.ip))
	}
	eventually(t, 20*time.Second, "node1 still learns node2's block over the mesh", n1.routeVia(b2, n2.ip))
	eventually(t, 15*time.Second, "pod on node1 -> address behind BIRD", reachable(p1.ns, birdAddr))
	eventually(t, 15*time.Second, "pod on node2 -> address behind BIRD", reachable(p2.ns, birdAddr))
	eventually(t, 15*time.Second, "pod on node1 -> pod on node2", reachable(p1.ns, p2.ip))
	out, _ := bird.birdc("show", "route")
	t.Logf("birdc show route:\n%s\nnode1 BGP routes:\n%s", out, n1.bgpRoutes())
}
