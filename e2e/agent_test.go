package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/calico-aio/calico-aio/store/api"
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
	if _, err := e.cl.DeleteResource(context.Background(), k, ns, name, 0); err != nil {
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
