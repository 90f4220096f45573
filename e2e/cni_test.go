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
	"github.com/vishvananda/netlink"

	"github.com/calico-aio/calico-aio/ipam"
	"github.com/calico-aio/calico-aio/store"
	"github.com/calico-aio/calico-aio/store/api"
	"github.com/calico-aio/calico-aio/store/storetest"
)

// cniEnv is one "host" with a datastore and a CNI_PATH, driven by libcni
// the way container runtimes drive plugins.
type cniEnv struct {
	t     testing.TB
	etcd  *storetest.Etcd
	cl    *store.Client
	host  *testHost
	bin   string
	cache string
	state string
	cfg   *libcni.CNIConfig
	// agent is the build startAgent runs (zero: the test's binary and
	// environment).
	agent agentBuild
}

func newCNIEnv(t testing.TB, hostIndex int) *cniEnv {
	needRoot(t)
	e := &cniEnv{t: t, host: newTestHost(t, hostIndex), bin: cniBinDir(t), cache: t.TempDir(), state: t.TempDir()}
	// The datastore lives in the host namespace, on its loopback.
	e.etcd = storetest.StartEtcdIn(t, e.inHost, "127.0.0.1")
	e.cl = e.etcd.Client(t)
	e.cfg = libcni.NewCNIConfigWithCacheDir([]string{e.bin}, e.cache, nil)
	return e
}

// calicoPlugin is the calico entry of a conflist.
func (e *cniEnv) calicoPlugin(node, extraIPAM string) string {
	return fmt.Sprintf(`{"type":"calico","nodename":%q,"etcd_endpoints":%q,"calico_lib_dir":%q,"calico_run_dir":%q,
"log_level":"info","ipam":{"type":"calico-ipam"%s}}`, node, e.etcd.Endpoints()[0], e.state+"/lib", e.state+"/run", extraIPAM)
}

func (e *cniEnv) conflist(version, name string, plugins ...string) *libcni.NetworkConfigList {
	e.t.Helper()
	l, err := libcni.ConfListFromBytes([]byte(fmt.Sprintf(`{"cniVersion":%q,"name":%q,"plugins":[%s]}`, version, name, strings.Join(plugins, ","))))
	if err != nil {
		e.t.Fatal(err)
	}
	return l
}

// inHost runs f on a thread in the host namespace (plugins exec'd from it
// run there too).
func (e *cniEnv) inHost(f func() error) error {
	return e.host.ns.Do(func(ns.NetNS) error { return f() })
}

func (e *cniEnv) add(l *libcni.NetworkConfigList, rt *libcni.RuntimeConf) (*current.Result, error) {
	var res types.Result
	err := e.inHost(func() error {
		var err error
		res, err = e.cfg.AddNetworkList(context.Background(), l, rt)
		return err
	})
	if err != nil {
		return nil, err
	}
	return current.NewResultFromResult(res)
}

func (e *cniEnv) del(l *libcni.NetworkConfigList, rt *libcni.RuntimeConf) error {
	return e.inHost(func() error { return e.cfg.DelNetworkList(context.Background(), l, rt) })
}

func (e *cniEnv) pool(name, cidr string) {
	createPool(e.t, e.cl, name, cidr, 0)
}

func podAddrs(res *current.Result) (v4, v6 string) {
	for _, ip := range res.IPs {
		if ip.Address.IP.To4() != nil {
			v4 = ip.Address.IP.String()
		} else {
			v6 = ip.Address.IP.String()
		}
	}
	return v4, v6
}

func (e *cniEnv) hostLinks() []string {
	var names []string
	_ = e.inHost(func() error {
		links, err := netlink.LinkList()
		for _, l := range links {
			if strings.HasPrefix(l.Attrs().Name, "cali") {
				names = append(names, l.Attrs().Name)
			}
		}
		return err
	})
	return names
}

// assertClean checks that nothing is left: no cali* link, no endpoint, no
// allocation.
func (e *cniEnv) assertClean() {
	e.t.Helper()
	if l := e.hostLinks(); len(l) != 0 {
		e.t.Errorf("host links left: %v", l)
	}
	weps, _, err := e.cl.ListResources(context.Background(), wepKindInfo(), "")
	if err != nil || len(weps) != 0 {
		e.t.Errorf("endpoints left: %d %v", len(weps), err)
	}
	hs, err := ipam.New(e.cl).ListHandles(context.Background())
	if err != nil || len(hs) != 0 {
		e.t.Errorf("IPAM handles left: %+v %v", hs, err)
	}
}

func wepKindInfo() api.KindInfo { k, _ := api.LookupKind("WorkloadEndpoint"); return k }

func TestCNIThroughLibcniEveryVersion(t *testing.T) {
	t.Parallel()
	forEachCNIPath(t, testCNIThroughLibcniEveryVersion)
}

func testCNIThroughLibcniEveryVersion(t *testing.T, path cniPath) {
	e := newCNIEnv(t, 1)
	e.host.forwardingOn(t) // calico-node, when it runs, would turn it on (IPv6 needs it even between local pods)
	e.servePath(path, "node1")
	e.pool("v4", "10.100.0.0/24")
	e.pool("v6", "fd00:100::/64")
	for _, v := range []string{"0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"} {
		t.Run(v, func(t *testing.T) {
			e.t = t
			netName := "net" + strings.ReplaceAll(v, ".", "")
			l := e.conflist(v, netName, e.calicoPlugin("node1", `,"assign_ipv6":"true"`))
			pod1, pod2 := newNS(t), newNS(t)
			rt1 := &libcni.RuntimeConf{ContainerID: "a" + netName, NetNS: pod1.Path(), IfName: "eth0"}
			rt2 := &libcni.RuntimeConf{ContainerID: "b" + netName, NetNS: pod2.Path(), IfName: "eth0"}
			r1, err := e.add(l, rt1)
			if err != nil {
				t.Fatalf("ADD pod1: %v", err)
			}
			r2, err := e.add(l, rt2)
			if err != nil {
				t.Fatalf("ADD pod2: %v", err)
			}
			a4, a6 := podAddrs(r1)
			b4, b6 := podAddrs(r2)
			if a4 == "" || a6 == "" || b4 == "" || b6 == "" {
				t.Fatalf("results lack addresses: %v / %v", r1.IPs, r2.IPs)
			}
			for _, dst := range []string{b4, b6} {
				eventually(t, 5*time.Second, "pod1 -> pod2 "+dst, reachable(pod1, dst))
			}
			eventually(t, 5*time.Second, "pod2 -> pod1", reachable(pod2, a4))
			if err := ping(pod1, "10.100.0.250"); err == nil {
				t.Errorf("ping to an unassigned address succeeded: the ping check proves nothing")
			}
			if v >= "0.4.0" {
				if err := e.inHost(func() error { return e.cfg.CheckNetworkList(context.Background(), l, rt1) }); err != nil {
					t.Errorf("CHECK: %v", err)
				}
			}
			if v >= "1.1.0" {
				if err := e.inHost(func() error { return e.cfg.GetStatusNetworkList(context.Background(), l) }); err != nil {
					t.Errorf("STATUS: %v", err)
				}
				// GC with only pod1 valid removes pod2's allocation and endpoint.
				gc := &libcni.GCArgs{ValidAttachments: []types.GCAttachment{{ContainerID: rt1.ContainerID, IfName: "eth0"}}}
				if err := e.inHost(func() error { return e.cfg.GCNetworkList(context.Background(), l, gc) }); err != nil {
					t.Errorf("GC: %v", err)
				}
				if ips, _ := ipam.New(e.cl).IPsByHandle(context.Background(), netName+"."+rt2.ContainerID); len(ips) != 0 {
					t.Errorf("GC left pod2's addresses %v", ips)
				}
				if ips, _ := ipam.New(e.cl).IPsByHandle(context.Background(), netName+"."+rt1.ContainerID); len(ips) != 2 {
					t.Errorf("GC took pod1's addresses: %v", ips)
				}
			}
			for _, rt := range []*libcni.RuntimeConf{rt1, rt2} {
				for i := 0; i < 2; i++ {
					if err := e.del(l, rt); err != nil {
						t.Errorf("DEL #%d %s: %v", i+1, rt.ContainerID, err)
					}
				}
			}
			e.assertClean()
		})
	}
}
