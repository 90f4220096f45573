package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/calico-aio/calico-aio/store"
	"github.com/calico-aio/calico-aio/store/storetest"
)

// cluster is N nodes, each a network namespace on a shared L2 segment (a
// bridge in its own namespace that also hosts etcd), each running the real
// binary as calico-node with BGP.
type cluster struct {
	t      testing.TB
	br     ns.NetNS
	etcd   *storetest.Etcd
	cl     *store.Client
	bin    string
	nodes  []*clusterNode
	subnet string // "10.250.0"
	// kube is the Kubernetes datastore the agents and the CNI plugin use
	// (cluster_kdd_test.go); nil: the etcd above.
	kube *clusterKube
}

type clusterNode struct {
	c     *cluster
	name  string
	index int
	ns    ns.NetNS
	ip    string
	state string
	agent *agentProc
	cfg   *libcni.CNIConfig
	args  []string
}

const bridgeIP = "254"

func newCluster(t testing.TB, n int, subnet string) *cluster {
	t.Helper()
	c := newBridge(t, subnet)
	c.etcd = storetest.StartEtcdIn(t, func(f func() error) error { return c.br.Do(func(ns.NetNS) error { return f() }) }, subnet+"."+bridgeIP)
	c.cl = c.etcd.Client(t)
	for i := 1; i <= n; i++ {
		c.addNode(i)
	}
	return c
}

// newBridge is a cluster of no nodes yet: the bridge in its namespace.
func newBridge(t testing.TB, subnet string) *cluster {
	t.Helper()
	needRoot(t)
	c := &cluster{t: t, br: newNS(t), bin: cniBinDir(t), subnet: subnet}
	mustNS(t, c.br, "ip", "link", "add", "br0", "type", "bridge")
	mustNS(t, c.br, "ip", "addr", "add", subnet+"."+bridgeIP+"/24", "dev", "br0")
	mustNS(t, c.br, "ip", "link", "set", "br0", "up")
	return c
}

// addNode wires node i onto the bridge (it does not start its agent).
func (c *cluster) addNode(i int) *clusterNode {
	t := c.t
	nd := &clusterNode{c: c, name: fmt.Sprintf("node%d", i), index: i, ns: newNS(t), ip: fmt.Sprintf("%s.%d", c.subnet, i), state: t.TempDir()}
	peer := fmt.Sprintf("n%d", i)
	mustNS(t, c.br, "ip", "link", "add", peer, "type", "veth", "peer", "name", "eth0", "netns", nsName(nd.ns))
	mustNS(t, c.br, "ip", "link", "set", peer, "master", "br0", "up")
	mustNS(t, nd.ns, "ip", "addr", "add", nd.ip+"/24", "dev", "eth0")
	mustNS(t, nd.ns, "ip", "link", "set", "eth0", "up")
	mustNS(t, nd.ns, "ip", "route", "add", "default", "via", c.subnet+"."+bridgeIP, "dev", "eth0")
	freshHostForwarding(t, nd.ns) // calico-node turns it on
	nd.cfg = libcni.NewCNIConfigWithCacheDir([]string{c.bin}, t.TempDir(), nil)
	c.nodes = append(c.nodes, nd)
	return nd
}

// start runs the node's agent (with BGP) and waits for it to be ready.
func (nd *clusterNode) start(extra ...string) {
	nd.c.t.Helper()
	args := append([]string{"--ip", nd.ip + "/24", "--bgp-port", "179"}, nd.args...)
	if nd.c.kube != nil {
		nd.agent = nd.c.kube.start(nd, append(args, extra...)...)
		return
	}
	nd.agent = startAgentIn(nd.c.t, nd.ns, nd.name, nd.c.etcd.Endpoints()[0], nd.state, append(args, extra...)...)
}

func (c *cluster) startAll() {
	for _, nd := range c.nodes {
		nd.start()
	}
}

// conflist is the node's CNI network config.
func (nd *clusterNode) conflist(network string) *libcni.NetworkConfigList {
	nd.c.t.Helper()
	if nd.c.kube != nil {
		return nd.c.kube.conflist(nd, network)
	}
	conf := fmt.Sprintf(`{"cniVersion":"1.0.0","name":%q,"plugins":[{"type":"calico","nodename":%q,"etcd_endpoints":%q,
"calico_lib_dir":%q,"calico_run_dir":%q,"ipam":{"type":"calico-ipam"}}]}`, network, nd.name, nd.c.etcd.Endpoints()[0], nd.state+"/lib", nd.state+"/run")
	l, err := libcni.ConfListFromBytes([]byte(conf))
	if err != nil {
		nd.c.t.Fatal(err)
	}
	return l
}

// pod creates a pod on the node through the CNI plugin.
func (nd *clusterNode) pod(network, id string, args ...[2]string) pod {
	t := nd.c.t
	t.Helper()
	n := newNS(t)
	rt := &libcni.RuntimeConf{ContainerID: id, NetNS: n.Path(), IfName: "eth0", Args: args}
	var res types.Result
	err := nd.ns.Do(func(ns.NetNS) error {
		var err error
		res, err = nd.cfg.AddNetworkList(context.Background(), nd.conflist(network), rt)
		return err
	})
	if err != nil {
		t.Fatalf("ADD %s on %s: %v", id, nd.name, err)
	}
	r, err := current.NewResultFromResult(res)
	if err != nil {
		t.Fatal(err)
	}
	v4, v6 := podAddrs(r)
	return pod{ns: n, ip: v4, ip6: v6, rt: rt}
}

func (nd *clusterNode) delPod(network string, p pod) {
	t := nd.c.t
	t.Helper()
	if err := nd.ns.Do(func(ns.NetNS) error {
		return nd.cfg.DelNetworkList(context.Background(), nd.conflist(network), p.rt)
	}); err != nil {
		t.Fatal(err)
	}
}

// bgpRoutes lists the node's kernel routes learned by BGP.
func (nd *clusterNode) bgpRoutes() string {
	out, _ := inNS(nd.ns, "ip", "route", "show", "proto", "81")
	return out
}

// ctl runs calicoctl from the node's namespace.
func (nd *clusterNode) ctl(args ...string) (string, error) {
	full := append([]string{"ctl"}, args...)
	full = append(full, "--etcd-endpoints", nd.c.etcd.Endpoints()[0], "--config", "")
	return inNS(nd.ns, binary, full...)
}

// nodeStatus runs calicoctl node status against the node's agent.
func (nd *clusterNode) nodeStatus() (string, error) {
	return inNS(nd.ns, binary, "ctl", "node", "status", "--run-dir", nd.state+"/run")
}

// waitMesh waits until every node's status shows all its peers Established.
func (c *cluster) waitMesh(peersEach int) {
	c.t.Helper()
	for _, nd := range c.nodes {
		if nd.agent == nil {
			continue
		}
		eventually(c.t, 30*time.Second, nd.name+" BGP sessions up", func() error {
			out, err := nd.nodeStatus()
			if err != nil {
				return err
			}
			if n := strings.Count(out, "| up "); n < peersEach {
				return fmt.Errorf("%d/%d peers up:\n%s", n, peersEach, out)
			}
			return nil
		})
	}
}

var ctxBG = context.Background()
