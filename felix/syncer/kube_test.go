package syncer

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/calico-aio/calico-aio/felix/calc"
	"github.com/calico-aio/calico-aio/k8s"
	"github.com/calico-aio/calico-aio/store/api"
	"github.com/calico-aio/calico-aio/store/etcdv3"
)

// A Kubernetes NetworkPolicy reaches the calculation as the Calico policy
// knp.default.<name> in its namespace; its deletion, an undecodable one
// and one whose podSelector cannot be converted withdraw it.
func TestDecodeKubePolicy(t *testing.T) {
	key := calc.ResourceUpdateKey(networkPolicyKind, "shop", "knp.default.web")
	put := k8s.FollowEvent{Type: k8s.FollowPut, Namespace: "shop", Name: "web",
		Object: []byte(`{"metadata":{"namespace":"shop","name":"web"},"spec":{"podSelector":{"matchLabels":{"app":"web"}}}}`)}
	us := decodeKubePolicy(put)
	if len(us) != 1 || us[0].Key != key || us[0].Deleted || us[0].Kind != "networkpolicies" {
		t.Fatalf("put: %+v", us)
	}
	p := us[0].Resource.(*api.NetworkPolicy)
	if p.Metadata.Namespace != "shop" || p.Metadata.Name != "knp.default.web" || p.Spec.Selector == "" {
		t.Errorf("policy %+v", p)
	}
	for name, ev := range map[string]k8s.FollowEvent{
		"delete":       {Type: k8s.FollowDelete, Namespace: "shop", Name: "web"},
		"undecodable":  {Type: k8s.FollowPut, Namespace: "shop", Name: "web", Object: []byte(`{`)},
		"bad selector": {Type: k8s.FollowPut, Namespace: "shop", Name: "web", Object: []byte(`{"metadata":{"namespace":"shop","name":"web"},"spec":{"podSelector":{"matchExpressions":[{"key":"a","operator":"Bogus"}]}}}`)},
	} {
		if us := decodeKubePolicy(ev); len(us) != 1 || us[0].Key != key || !us[0].Deleted || us[0].Resource != nil {
			t.Errorf("%s: %+v", name, us)
		}
	}
}

// EndpointSlices reach the calculation as their Service's endpoints under
// the key the etcd-mode controller publishes them at: each slice change
// regroups its Service (both, when its service label changes); the last
// slice gone deletes it.
func TestSliceIndex(t *testing.T) {
	x := newSliceIndex()
	slice := func(name, svc, addr string) k8s.FollowEvent {
		return k8s.FollowEvent{Type: k8s.FollowPut, Namespace: "shop", Name: name, Object: []byte(fmt.Sprintf(
			`{"metadata":{"namespace":"shop","name":%q,"labels":{"kubernetes.io/service-name":%q}},"addressType":"IPv4","endpoints":[{"addresses":[%q]}],"ports":[{"port":80}]}`,
			name, svc, addr))}
	}
	show := func(us []calc.Update) string {
		var out []string
		for _, u := range us {
			s := strings.TrimPrefix(u.Key, etcdv3.ServicePrefix) + ":"
			if u.Deleted {
				s += "deleted"
			} else {
				for _, sl := range u.Service.Slices {
					s += " " + sl.Name + "=" + strings.Join(sl.Addresses, ",")
				}
			}
			out = append(out, s)
		}
		slices.Sort(out)
		return strings.Join(out, "; ")
	}
	for i, step := range []struct {
		ev   k8s.FollowEvent
		want string
	}{
		{slice("web-1", "web", "10.0.0.1"), "shop/web: web-1=10.0.0.1"},
		{slice("web-2", "web", "10.0.0.2"), "shop/web: web-1=10.0.0.1 web-2=10.0.0.2"},
		{slice("web-2", "api", "10.0.0.2"), "shop/api: web-2=10.0.0.2; shop/web: web-1=10.0.0.1"},
		{k8s.FollowEvent{Type: k8s.FollowDelete, Namespace: "shop", Name: "web-1"}, "shop/web:deleted"},
		{slice("none", "", "10.0.0.9"), ""},
	} {
		if got := show(x.apply(step.ev)); got != step.want {
			t.Errorf("step %d: %q, want %q", i, got, step.want)
		}
	}
}

// On the Kubernetes datastore an endpoint with no addresses (a pod before
// its ADD or after its DEL) reaches the calculation as deleted; on etcd,
// and with addresses, as it is.
func TestWithoutUnaddressed(t *testing.T) {
	wep := func(nets ...string) calc.Update {
		w := &api.WorkloadEndpoint{}
		w.Spec.IPNetworks = nets
		return calc.Update{Kind: "workloadendpoints", Key: "k", Resource: w}
	}
	kube := &syncer{kube: &k8s.Client{}}
	if u := kube.withoutUnaddressed(wep()); !u.Deleted || u.Resource != nil {
		t.Errorf("kubernetes, no addresses: %+v", u)
	}
	if u := kube.withoutUnaddressed(wep("10.0.0.1/32")); u.Deleted || u.Resource == nil {
		t.Errorf("kubernetes, an address: %+v", u)
	}
	if u := (&syncer{}).withoutUnaddressed(wep()); u.Deleted || u.Resource == nil {
		t.Errorf("etcd, no addresses: %+v", u)
	}
}
