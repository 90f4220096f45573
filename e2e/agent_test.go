package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/calico-aio/calico-aio/store/api"
	"github.com/calico-aio/calico-aio/store/storetest"
)

// pod is a workload created through the CNI plugin.
type pod struct {
	ns  ns.NetNS
	ip  string
	ip6 string
	rt  *libcni.RuntimeConf
}

func (e *cniEnv) newPod(l *libcni.NetworkConfigList, id string, args ...[2]string) pod {
	e.t.Helper()
	n := newNS(e.t)
	rt := &libcni.RuntimeConf{ContainerID: id, NetNS: n.Path(), IfName: "eth0", Args: args}
	res, err := e.add(l, rt)
	if err != nil {
		e.t.Fatalf("ADD %s: %v", id, err)
	}
	v4, v6 := podAddrs(res)
	return pod{ns: n, ip: v4, ip6: v6, rt: rt}
}

func (e *cniEnv) apply(r api.Resource) {
	e.t.Helper()
	if _, err := e.cl.ApplyResource(context.Background(), r); err != nil {
		e.t.Fatal(err)
	}
}

func (e *cniEnv) remove(kind, ns, name string) {
	e.t.Helper()
	k, _ := api.LookupKind(kind)
	if _, err := e.cl.DeleteResource(context.Background(), k, ns, name, ""); err != nil {
		e.t.Fatal(err)
	}
}

func gnp(name string, order float64, sel string, ingress, egress []api.Rule) *api.GlobalNetworkPolicy {
	k, _ := api.LookupKind("GlobalNetworkPolicy")
	p := k.NewObject().(*api.GlobalNetworkPolicy)
	p.Metadata.Name, p.Spec.Order, p.Spec.Selector = name, &order, sel
	p.Spec.Ingress, p.Spec.Egress = ingress, egress
	if ingress != nil {
		p.Spec.Types = append(p.Spec.Types, api.PolicyTypeIngress)
	}
	if egress != nil {
		p.Spec.Types = append(p.Spec.Types, api.PolicyTypeEgress)
	}
	return p
}

// The agent programs policy: a profile lets pods of a network talk, a
// global deny policy stops it, deleting the policy restores it.
func TestAgentEnforcesPolicy(t *testing.T) {
	e := newCNIEnv(t, 6)
	e.pool("p", "10.106.0.0/24")
	l := e.conflist("1.0.0", "polnet", e.calicoPlugin("node1", ""))
	e.startAgent("node1")
	a, b := e.newPod(l, "pa"), e.newPod(l, "pb")
	eventually(t, 10*time.Second, "pods of one network reach each other", reachable(a.ns, b.ip))
	e.apply(gnp("deny-b", 10, "all()", []api.Rule{{Action: api.ActionDeny}}, nil))
	eventually(t, 10*time.Second, "deny policy enforced", unreachable(a.ns, b.ip))
	e.remove("GlobalNetworkPolicy", "", "deny-b")
	eventually(t, 10*time.Second, "deny removed", reachable(a.ns, b.ip))
}

// Start-up contract: node registration, the files for the CNI plugin,
// health, metrics and endpoint status in etcd.
func TestAgentStartupHealthMetricsStatus(t *testing.T) {
	e := newCNIEnv(t, 7)
	e.pool("p", "10.107.0.0/24")
	a := e.startAgent("node1", "--mtu", "1410")
	k, _ := api.LookupKind("Node")
	r, err := e.cl.GetResource(context.Background(), k, "", "node1")
	if err != nil {
		t.Fatalf("Node not registered: %v", err)
	}
	if n := r.(*api.Node); n.Spec.BGP == nil || n.Spec.BGP.IPv4Address != e.host.hostIP+"/30" {
		t.Errorf("Node spec.bgp = %+v, want ipv4Address %s/30 (autodetected)", n.Spec.BGP, e.host.hostIP)
	}
	for file, want := range map[string]string{"nodename": "node1", "mtu": "1410"} {
		if b, err := os.ReadFile(filepath.Join(e.state, "lib", file)); err != nil || string(b) != want {
			t.Errorf("%s = %q, %v; want %q", file, b, err, want)
		}
	}
	if code, body := httpGetIn(e.host.ns, "http://"+a.health+"/liveness"); code != 200 {
		t.Errorf("liveness: %d %s", code, body)
	}
	metricsAddr := ""
	for i, arg := range a.cmd.Args {
		if arg == "--metrics-addr" {
			metricsAddr = a.cmd.Args[i+1]
		}
	}
	// A pod: with endpointReportingEnabled false (Calico's default) no
	// endpoint status is written; the agent's own status is.
	l := e.conflist("1.0.0", "stat", e.calicoPlugin("node1", ""))
	p := e.newPod(l, "statuspod")
	key := "/calico/felix/v2/no-region/host/node1/workload/cni/statuspod/endpoint/eth0"
	eventually(t, 10*time.Second, "metrics count the endpoint", func() error {
		code, body := httpGetIn(e.host.ns, "http://"+metricsAddr+"/metrics")
		if code != 200 || !strings.Contains(body, "felix_active_local_endpoints 1") || !strings.Contains(body, "felix_int_dataplane_apply_time_seconds_count") {
			return fmt.Errorf("metrics %d: %.300s", code, body)
		}
		return nil
	})
	if kv, err := storetest.Raw(e.t, e.cl).GetKey(context.Background(), "/calico/felix/v2/no-region/host/node1/status"); err != nil || !strings.Contains(string(kv.Value), `"uptime"`) {
		t.Errorf("agent status: %s, %v", kv.Value, err)
	}
	if kv, err := storetest.Raw(e.t, e.cl).GetKey(context.Background(), key); err == nil {
		t.Errorf("endpoint status written with endpointReportingEnabled unset: %s", kv.Value)
	}
	// Turned on live, it appears under Calico's felix status keys.
	fk, _ := api.LookupKind("FelixConfiguration")
	fcfg := fk.NewObject().(*api.FelixConfiguration)
	fcfg.Metadata.Name = "default"
	on := true
	fcfg.Spec.EndpointReportingEnabled = &on
	if _, err := e.cl.CreateResource(context.Background(), fcfg); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "endpoint status reported", func() error {
		kv, err := storetest.Raw(e.t, e.cl).GetKey(context.Background(), key)
		if err != nil {
			return err
		}
		if string(kv.Value) != `{"status":"up"}` {
			return fmt.Errorf("status %s", kv.Value)
		}
		return nil
	})
	// Its permanent neighbour entry and route are in place.
	neigh := mustNS(t, e.host.ns, "ip", "neigh", "show", "nud", "permanent")
	if !strings.Contains(neigh, p.ip) {
		t.Errorf("no permanent neighbour for %s:\n%s", p.ip, neigh)
	}
	if err := e.del(l, p.rt); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "endpoint status removed", func() error {
		if _, err := storetest.Raw(e.t, e.cl).GetKey(context.Background(), key); err == nil {
			return fmt.Errorf("still there")
		}
		return nil
	})
}

// A node address already used by another node is a clear start-up error.
func TestAgentRefusesDuplicateNodeIP(t *testing.T) {
	e := newCNIEnv(t, 8)
	k, _ := api.LookupKind("Node")
	other := k.NewObject().(*api.Node)
	other.Metadata.Name = "other"
	other.Spec.BGP = &api.NodeBGPSpec{IPv4Address: e.host.hostIP + "/30"}
	if _, err := e.cl.CreateResource(context.Background(), other); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary, "node", "--nodename", "node1", "--etcd-endpoints", e.etcd.Endpoints()[0],
		"--lib-dir", e.state+"/lib", "--run-dir", e.state+"/run", "--health-addr", "", "--metrics-addr", "", "--bgp=false")
	var out []byte
	err := e.inHost(func() error {
		var err error
		out, err = cmd.CombinedOutput()
		return err
	})
	if err == nil || !strings.Contains(string(out), `is already used by node "other"`) {
		t.Errorf("agent with a duplicate IP: %v\n%s", err, out)
	}
}
