package e2e

import (
	"testing"

	"github.com/calico-aio/calico-aio/store/api"
)

// Kubernetes pods (CNI_ARGS K8S_POD_NAMESPACE/K8S_POD_NAME) in namespaces
// "red" and "blue". A NetworkPolicy's selectors only see its namespace;
// a namespaceSelector matches the labels of the namespace's kns.<ns>
// profile, written the way Calico's kube-controllers write them
// ("pcns.<label>"); a GlobalNetworkPolicy's namespaceSelector picks the
// endpoints it applies to.
func TestPolicyTrafficNamespaces(t *testing.T) {
	t.Parallel()
	e, l := policyEnv(t, 26, "10.126.0.0/24", "")
	r1, r2, b1 := e.k8sPod(l, "red", "r1"), e.k8sPod(l, "red", "r2"), e.k8sPod(l, "blue", "b1")
	if w := e.endpointOf(b1); w.Spec.Orchestrator != "k8s" || len(w.Spec.Profiles) != 1 || w.Spec.Profiles[0] != "kns.blue" {
		t.Fatalf("b1's endpoint: orchestrator %q profiles %v", w.Spec.Orchestrator, w.Spec.Profiles)
	}
	expectTraffic(t, "namespace profiles allow everything",
		allow("red->red", reachable(r2.ns, r1.ip)), allow("blue->red", reachable(b1.ns, r1.ip)))

	np := kindOf("NetworkPolicy").NewObject().(*api.NetworkPolicy)
	np.Metadata.Name, np.Metadata.Namespace = "from-own-ns", "red"
	np.Spec.Types = []api.PolicyType{api.PolicyTypeIngress}
	np.Spec.Ingress = []api.Rule{{Action: api.ActionAllow, Source: api.EntityRule{Selector: "all()"}}}
	e.apply(np)
	expectTraffic(t, "a namespaced selector only sees its namespace",
		allow("red->red", reachable(r2.ns, r1.ip)), deny("blue->red", reachable(b1.ns, r1.ip)),
		allow("red->blue (blue not selected)", reachable(r1.ns, b1.ip)))

	team := func(ns, value string) {
		p := getAs[*api.Profile](e, "Profile", "", "kns."+ns)
		p.Spec.LabelsToApply = map[string]string{"pcns.projectcalico.org/name": ns, "pcns.team": value}
		e.apply(p)
	}
	team("blue", "blue")
	team("red", "red")
	np.Metadata.ResourceVersion = ""
	np.Spec.Ingress = []api.Rule{{Action: api.ActionAllow, Source: api.EntityRule{NamespaceSelector: `team == "blue"`}}}
	e.apply(np)
	expectTraffic(t, "namespaceSelector team == blue",
		allow("blue->red", reachable(b1.ns, r1.ip)), deny("red->red", reachable(r2.ns, r1.ip)))

	team("blue", "green")
	team("red", "blue")
	expectTraffic(t, "relabelled namespaces swap places",
		deny("blue->red", reachable(b1.ns, r1.ip)), allow("red->red", reachable(r2.ns, r1.ip)))

	e.remove("NetworkPolicy", "red", "from-own-ns")
	g := gnp("deny-into-green", 1, "all()", []api.Rule{{Action: api.ActionDeny}}, nil)
	g.Spec.NamespaceSelector = `team == "green"`
	e.apply(g)
	expectTraffic(t, "a global policy for the namespaces labelled green",
		deny("red->blue", reachable(r1.ns, b1.ip)),
		allow("blue->red", reachable(b1.ns, r1.ip)), allow("red->red", reachable(r2.ns, r1.ip)))
}
