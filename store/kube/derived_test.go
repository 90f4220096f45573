package kube_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/calico-aio/calico-aio/store/kdd"
	"github.com/calico-aio/calico-aio/store/kdd/derive"
	"github.com/calico-aio/calico-aio/store/model"
)

// recordedObject is one recorded version of an object (any kind).
func recordedObject(t *testing.T, key, step string) map[string]any {
	t.Helper()
	var f struct {
		Objects map[string][]struct {
			Step   string          `json:"step"`
			Object json.RawMessage `json:"object"`
		} `json:"objects"`
	}
	if err := json.Unmarshal(objectsJSON, &f); err != nil {
		t.Fatal(err)
	}
	for _, v := range f.Objects[key] {
		if v.Step == step {
			return decode(t, v.Object)
		}
	}
	t.Fatalf("%s@%s not recorded", key, step)
	return nil
}

// create stores a Kubernetes object as recorded (without what the server
// sets) and returns it as the server stored it.
func (c *cluster) create(t *testing.T, coll string, o map[string]any) []byte {
	t.Helper()
	code, body := c.kapi.Do(t, http.MethodPost, coll, clientCopy(o))
	if code != http.StatusCreated {
		t.Fatalf("POST %s: %d %s", coll, code, body)
	}
	return body
}

// wantRead fails unless the backend's object is the derivation's.
func wantRead(t *testing.T, got model.Object, err error, key model.Key, want kdd.Read, derr error) {
	t.Helper()
	if err != nil || derr != nil {
		t.Fatalf("%s: %v (derivation: %v)", key, err, derr)
	}
	if got.Key != key || got.Revision != model.Revision(want.ResourceVersion) || !reflect.DeepEqual(decode(t, got.Value), decode(t, want.Model)) {
		t.Errorf("%s:\n got  %s %s at %s\n want %s at %s", key, got.Key, got.Value, got.Revision, want.Model, want.ResourceVersion)
	}
}

// TestDerivedKinds: Node, WorkloadEndpoint and Profile read from the
// recorded Kubernetes Node, Pod, Namespace and ServiceAccount as Calico
// derives them (store/kdd's derivations of what the server holds), under
// Calico's names; they are not written through the backend.
func TestDerivedKinds(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	ctx := context.Background()
	ns := c.create(t, "/api/v1/namespaces", map[string]any{"apiVersion": "v1", "kind": "Namespace",
		"metadata": map[string]any{"name": "shop", "labels": map[string]any{"team": "red"}}})
	sa := c.create(t, "/api/v1/namespaces/shop/serviceaccounts", recordedObject(t, "ServiceAccount/shop/web-sa", "3a-before-cni"))
	node := c.create(t, "/api/v1/nodes", recordedObject(t, "Node/node1", "3f-after-del-all"))
	pod := c.create(t, "/api/v1/namespaces/shop/pods", recordedObject(t, "Pod/shop/web-1", "3b-after-add-web-1"))

	wepKey := model.Key{Kind: "WorkloadEndpoint", Namespace: "shop", Name: "node1-k8s-web--1-eth0"}
	o, err := c.b.Get(ctx, wepKey)
	r, _, derr := derive.PodToWorkloadEndpoint(pod)
	wantRead(t, o, err, wepKey, r, derr)
	if !strings.Contains(string(o.Value), `"ipNetworks":["10.244.166.128/32"]`) {
		t.Errorf("endpoint %s lacks the address the CNI annotation gives", o.Value)
	}
	nodeKey := model.Key{Kind: "Node", Name: "node1"}
	o, err = c.b.Get(ctx, nodeKey)
	r, derr = kdd.NodeFromK8s(node)
	wantRead(t, o, err, nodeKey, r, derr)
	for name, src := range map[string]func() (kdd.Read, error){
		"kns.shop":                 func() (kdd.Read, error) { return derive.NamespaceProfile(ns) },
		"ksa.shop.web-sa":          func() (kdd.Read, error) { return derive.ServiceAccountProfile(sa) },
		derive.DefaultAllowProfile: derive.DefaultAllow,
	} {
		key := model.Key{Kind: "Profile", Name: name}
		o, err := c.b.Get(ctx, key)
		r, derr := src()
		wantRead(t, o, err, key, r, derr)
	}

	for _, missing := range []model.Key{
		{Kind: "WorkloadEndpoint", Namespace: "shop", Name: "node2-k8s-web--1-eth0"}, // the pod is on node1
		{Kind: "WorkloadEndpoint", Namespace: "shop", Name: "node1-k8s-web--9-eth0"},
		{Kind: "WorkloadEndpoint", Namespace: "shop", Name: "web-1"},
		{Kind: "Node", Name: "node9"},
		{Kind: "Profile", Name: "kns.nowhere"},
		{Kind: "Profile", Name: "ksa.shop.nobody"},
		{Kind: "Profile", Name: "other"},
	} {
		var nf *model.NotFoundError
		if _, err := c.b.Get(ctx, missing); !errors.As(err, &nf) || nf.Key != missing {
			t.Errorf("get %s: %v, want a *NotFoundError naming it", missing, err)
		}
	}
	checkDerivedLists(t, c)
	t.Run("NodeWrite", func(t *testing.T) { checkNodeWrite(t, c) })
	if _, err := c.b.Create(ctx, nodeKey, []byte(`{}`)); err == nil || !strings.Contains(err.Error(), "derived from the Kubernetes nodes") {
		t.Errorf("create %s: %v, want a refusal naming the Kubernetes resource", nodeKey, err)
	}
}

func checkDerivedLists(t *testing.T, c *cluster) {
	ctx := context.Background()
	for _, l := range []struct {
		opts model.ListOptions
		want []string
	}{
		{model.ListOptions{Kind: "WorkloadEndpoint", Namespace: "shop"}, []string{"WorkloadEndpoint(shop/node1-k8s-web--1-eth0)"}},
		{model.ListOptions{Kind: "WorkloadEndpoint", Namespace: "other"}, []string{}},
		{model.ListOptions{Kind: "Node"}, []string{"Node(node1)"}},
	} {
		objs, rev, err := c.b.List(ctx, l.opts)
		if got := keysOf(objs); err != nil || rev == "" || !slices.Equal(got, l.want) {
			t.Errorf("list %+v = %v at %q, %v; want %v", l.opts, got, rev, err, l.want)
		}
	}
	objs, rev, err := c.b.List(ctx, model.ListOptions{Kind: "Profile"})
	got := keysOf(objs)
	for _, want := range []string{"Profile(kns.shop)", "Profile(ksa.shop.web-sa)", "Profile(projectcalico-default-allow)"} {
		if !slices.Contains(got, want) {
			t.Errorf("profiles %v lack %s", got, want)
		}
	}
	if err != nil || strings.Count(string(rev), "/") != 1 {
		t.Errorf("profile list revision %q, %v; want <namespaces>/<serviceaccounts>", rev, err)
	}
}

// TestDerivedWatches: watches of the derived kinds follow their
// Kubernetes objects.
func TestDerivedWatches(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	c.namespace(t, "shop")
	t.Run("WorkloadEndpoint", func(t *testing.T) { checkEndpointWatch(t, c) })
	t.Run("Profile", func(t *testing.T) { checkProfileWatch(t, c) })
}

// checkEndpointWatch: endpoints follow their pods: a pod bound to a node
// appears, a CNI annotation change updates it, its deletion deletes it; a
// pod on no node has none.
func checkEndpointWatch(t *testing.T, c *cluster) {
	v := startWatch(t, c, model.ListOptions{Kind: "WorkloadEndpoint", Namespace: "shop"})
	eventually(t, "the initial list", func() bool { _, synced, _ := v.state(); return synced == 1 })
	pod := recordedObject(t, "Pod/shop/web-1", "3b-after-add-web-1")
	c.create(t, "/api/v1/namespaces/shop/pods", pod)
	unbound := recordedObject(t, "Pod/shop/web-2", "3a-before-cni")
	delete(unbound["spec"].(map[string]any), "nodeName")
	c.create(t, "/api/v1/namespaces/shop/pods", unbound)
	key := model.Key{Kind: "WorkloadEndpoint", Namespace: "shop", Name: "node1-k8s-web--1-eth0"}
	eventually(t, "the endpoint", func() bool { objs, _, _ := v.state(); return strings.Contains(objs[key], "10.244.166.128/32") })
	patch := `{"metadata":{"annotations":{"cni.projectcalico.org/podIP":"","cni.projectcalico.org/podIPs":""}}}`
	if code, body := c.kapi.Do(t, http.MethodPatch, "/api/v1/namespaces/shop/pods/web-1", patch); code != http.StatusOK {
		t.Fatalf("patch: %d %s", code, body)
	}
	eventually(t, "the endpoint without its address", func() bool {
		objs, _, _ := v.state()
		return objs[key] != "" && !strings.Contains(objs[key], "10.244.166.128")
	})
	if code, body := c.kapi.Do(t, http.MethodDelete, "/api/v1/namespaces/shop/pods/web-1", map[string]any{"gracePeriodSeconds": 0}); code != http.StatusOK {
		t.Fatalf("delete: %d %s", code, body)
	}
	eventually(t, "the endpoint deleted", func() bool { objs, _, _ := v.state(); return len(objs) == 0 })
	_, synced, bad := v.state()
	if synced != 1 || len(bad) > 0 {
		t.Errorf("synced %d times, bad events %v", synced, bad)
	}
}

// checkProfileWatch: profiles follow namespaces and service accounts,
// after projectcalico-default-allow and one EventSynced for both lists.
func checkProfileWatch(t *testing.T, c *cluster) {
	v := startWatch(t, c, model.ListOptions{Kind: "Profile"})
	kns := model.Key{Kind: "Profile", Name: "kns.shop"}
	ksa := model.Key{Kind: "Profile", Name: "ksa.shop.web-sa"}
	da := model.Key{Kind: "Profile", Name: derive.DefaultAllowProfile}
	eventually(t, "the initial lists", func() bool {
		objs, synced, _ := v.state()
		return synced == 1 && objs[kns] != "" && objs[da] != ""
	})
	c.create(t, "/api/v1/namespaces/shop/serviceaccounts", recordedObject(t, "ServiceAccount/shop/web-sa", "3a-before-cni"))
	eventually(t, "the service account's profile", func() bool { objs, _, _ := v.state(); return strings.Contains(objs[ksa], "pcsa.tier") })
	patch := `{"metadata":{"labels":{"team":"blue"}}}`
	if code, body := c.kapi.Do(t, http.MethodPatch, "/api/v1/namespaces/shop", patch); code != http.StatusOK {
		t.Fatalf("patch: %d %s", code, body)
	}
	eventually(t, "the namespace's new label", func() bool { objs, _, _ := v.state(); return strings.Contains(objs[kns], `"pcns.team":"blue"`) })
	if code, body := c.kapi.Do(t, http.MethodDelete, "/api/v1/namespaces/shop/serviceaccounts/web-sa", nil); code != http.StatusOK {
		t.Fatalf("delete: %d %s", code, body)
	}
	eventually(t, "the profile deleted", func() bool { objs, _, _ := v.state(); _, has := objs[ksa]; return !has })
	_, synced, bad := v.state()
	if synced != 1 || len(bad) > 0 {
		t.Errorf("synced %d times, bad events %v", synced, bad)
	}
}

// checkNodeWrite: a Calico Node write is what real calicoctl's `patch
// node` and `label nodes` did: the projectcalico.org/* annotations on the
// Kubernetes Node (as recorded), put through nodes/<name>/status at the
// revision read; the Kubernetes labels stay.
func checkNodeWrite(t *testing.T, c *cluster) {
	ctx := context.Background()
	before := recordedObject(t, "Node/node1", "3a-before-cni")
	after := recordedObject(t, "Node/node1", "3f-after-del-all")
	before["metadata"].(map[string]any)["name"] = "node-w"
	c.create(t, "/api/v1/nodes", before)
	key := model.Key{Kind: "Node", Name: "node-w"}
	o, err := c.b.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	m := decode(t, o.Value)
	m["spec"].(map[string]any)["bgp"] = map[string]any{"ipv4Address": "192.0.2.1/24", "asNumber": 64600}
	m["metadata"].(map[string]any)["labels"].(map[string]any)["calico-role"] = "edge"
	value, _ := json.Marshal(m)
	n := len(c.requests(t, "nodes"))
	rev, err := c.b.Update(ctx, key, value, o.Revision)
	if err != nil {
		t.Fatal(err)
	}
	reqs := c.requests(t, "nodes")[n:]
	if len(reqs) != 2 || reqs[1].Verb != "update" || reqs[1].ObjectRef.Subresource != "status" {
		t.Errorf("requests %+v, want a get and an update of nodes/node-w/status", reqs)
	}
	raw := c.raw(t, "/api/v1/nodes/node-w")
	meta, want := raw["metadata"].(map[string]any), after["metadata"].(map[string]any)
	if !reflect.DeepEqual(meta["annotations"], want["annotations"]) || !reflect.DeepEqual(meta["labels"], want["labels"]) {
		t.Errorf("Kubernetes Node written:\n got  annotations %v labels %v\n want annotations %v labels %v", meta["annotations"], meta["labels"], want["annotations"], want["labels"])
	}
	if _, err := c.b.Update(ctx, key, value, o.Revision); !errors.Is(err, model.ErrConflict) {
		t.Errorf("update at a stale revision: %v, want a conflict", err)
	}
	got, err := c.b.Get(ctx, key)
	if err != nil || got.Revision != rev || !strings.Contains(string(got.Value), `"asNumber":64600`) || !strings.Contains(string(got.Value), `"calico-role":"edge"`) {
		t.Errorf("read back at %q (wrote %q), %v: %s", got.Revision, rev, err, got.Value)
	}
}
