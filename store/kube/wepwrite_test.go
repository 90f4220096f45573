package kube_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/calico-aio/calico-aio/store/kdd/derive"
	"github.com/calico-aio/calico-aio/store/model"
)

// TestEndpointWrites: a WorkloadEndpoint written through the backend is a
// patch of its pod's status annotations as Calico's CNI plugin makes it
// (recorded), read back as the derived endpoint with the addresses; a
// field the pod cannot carry is refused by name with nothing written; a
// delete empties podIP/podIPs with the pod's resourceVersion and uid as
// preconditions, and a delete at an older revision (an old sandbox's DEL
// after a newer sandbox's ADD) is a conflict that leaves the newer
// sandbox's addresses.
func TestEndpointWrites(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	ctx := context.Background()
	c.create(t, "/api/v1/namespaces", map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "shop"}})
	c.create(t, "/api/v1/namespaces/shop/serviceaccounts", recordedObject(t, "ServiceAccount/shop/web-sa", "3a-before-cni"))
	c.create(t, "/api/v1/namespaces/shop/pods", recordedObject(t, "Pod/shop/web-1", "3a-before-cni"))
	key := model.Key{Kind: "WorkloadEndpoint", Namespace: "shop", Name: "node1-k8s-web--1-eth0"}

	// Calico's write of the recorded ADD: the endpoint as read, with the
	// container and its address.
	const oldID, newID = "c4719afa76fa448b5eca99e6736885846501d17956f2fcb2de5c916d723f3a87", "612f7a0edd33d5c1a7f59b38db605f5f0f9bf63cb4ce753b9bad0ff3aa941412"
	before, err := c.b.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	checkEndpointRefusals(t, c, key, before.Value)
	rev1 := writeEndpoint(t, c, key, before.Value, oldID, "10.244.166.128/32")
	wantPatches(t, c, `{"metadata":{"annotations":{"cni.projectcalico.org/containerID":"`+oldID+`","cni.projectcalico.org/podIP":"10.244.166.128/32","cni.projectcalico.org/podIPs":"10.244.166.128/32"}}}`)
	o, err := c.b.Get(ctx, key)
	if err != nil || o.Revision != rev1 || !strings.Contains(string(o.Value), `"ipNetworks":["10.244.166.128/32"]`) {
		t.Fatalf("read after write: %s at %s, %v (written at %s)", o.Value, o.Revision, err, rev1)
	}
	list, _, err := c.b.List(ctx, model.ListOptions{Kind: "WorkloadEndpoint", Namespace: "shop"})
	if err != nil || len(list) != 1 || !reflect.DeepEqual(decode(t, list[0].Value), decode(t, o.Value)) {
		t.Errorf("list after write: %v, %v; want %s", list, err, o.Value)
	}

	// A newer sandbox of the pod is added; the old sandbox's DEL, at the
	// revision it read, must not clear the newer one's addresses.
	rev2 := writeEndpoint(t, c, key, o.Value, newID, "10.244.166.129/32")
	if err := c.b.Delete(ctx, key, rev1); !errors.As(err, new(*model.ConflictError)) {
		t.Errorf("delete at the old sandbox's revision: %v, want a conflict", err)
	}
	// An update is a compare-and-swap on the pod's resourceVersion.
	stale := endpointWith(t, o.Value, func(spec map[string]any) { spec["containerID"] = oldID })
	if _, err := c.b.Update(ctx, key, stale, rev1); !errors.As(err, new(*model.ConflictError)) {
		t.Errorf("update at the old sandbox's revision: %v, want a conflict", err)
	}
	cur, err := c.b.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if rev2, err = c.b.Update(ctx, key, cur.Value, rev2); err != nil {
		t.Fatalf("update at the current revision: %v", err)
	}
	wantPatches(t, c, `{"metadata":{"annotations":{"cni.projectcalico.org/containerID":"`+newID+`","cni.projectcalico.org/podIP":"10.244.166.129/32","cni.projectcalico.org/podIPs":"10.244.166.129/32"},"resourceVersion":"`+string(cur.Revision)+`"}}`)
	ann := podAnnotations(t, c)
	if ann[derive.AnnotationContainerID] != newID || ann[derive.AnnotationPodIPs] != "10.244.166.129/32" {
		t.Errorf("after the old sandbox's delete: %v, want the newer sandbox's", ann)
	}

	// The newer sandbox's DEL: as recorded, podIP and podIPs emptied with
	// the pod's resourceVersion and uid, the containerID kept.
	if err := c.b.Delete(ctx, key, rev2); err != nil {
		t.Fatal(err)
	}
	pod := c.raw(t, "/api/v1/namespaces/shop/pods/web-1")
	md := pod["metadata"].(map[string]any)
	uid := md["uid"].(string)
	wantPatches(t, c, `{"metadata":{"annotations":{"cni.projectcalico.org/podIP":"","cni.projectcalico.org/podIPs":""},"resourceVersion":"`+string(rev2)+`","uid":"`+uid+`"}}`)
	ann = podAnnotations(t, c)
	if ann[derive.AnnotationContainerID] != newID || ann[derive.AnnotationPodIP] != "" || ann[derive.AnnotationPodIPs] != "" {
		t.Errorf("after delete: %v", ann)
	}
	if o, err := c.b.Get(ctx, key); err != nil || strings.Contains(string(o.Value), "ipNetworks") {
		t.Errorf("read after delete: %s, %v; want the endpoint without addresses", o.Value, err)
	}
	// A second delete (no revision: read, then patch) succeeds, as Calico's.
	if err := c.b.Delete(ctx, key, ""); err != nil {
		t.Errorf("second delete: %v", err)
	}
	if err := c.b.Delete(ctx, model.Key{Kind: "WorkloadEndpoint", Namespace: "shop", Name: "node1-k8s-gone-eth0"}, ""); !errors.Is(err, model.ErrNotFound) {
		t.Errorf("delete of a missing pod's endpoint: %v, want not found", err)
	}
}

// writeEndpoint writes the endpoint value with a container and address.
func writeEndpoint(t *testing.T, c *cluster, key model.Key, value []byte, containerID, ip string) model.Revision {
	t.Helper()
	rev, err := c.b.Create(context.Background(), key, endpointWith(t, value, func(spec map[string]any) {
		spec["containerID"], spec["ipNetworks"] = containerID, []string{ip}
	}))
	if err != nil {
		t.Fatalf("write %s: %v", key, err)
	}
	return rev
}

// endpointWith is an endpoint value changed by edit (of its spec).
func endpointWith(t *testing.T, value []byte, edit func(spec map[string]any)) []byte {
	t.Helper()
	w := decode(t, value)
	edit(w["spec"].(map[string]any))
	b, err := json.Marshal(w)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// checkEndpointRefusals: what the pod cannot carry is refused by name and
// nothing is patched.
func checkEndpointRefusals(t *testing.T, c *cluster, key model.Key, value []byte) {
	t.Helper()
	add := func(spec map[string]any) {
		spec["containerID"], spec["ipNetworks"] = "abc", []string{"10.244.166.128/32"}
	}
	cases := []struct {
		name  string
		key   model.Key
		edit  func(w map[string]any)
		field string
	}{
		{"mac", key, func(w map[string]any) { w["spec"].(map[string]any)["mac"] = "ee:ee:ee:ee:ee:01" }, "spec.mac"},
		{"profiles", key, func(w map[string]any) { w["spec"].(map[string]any)["profiles"] = []string{"kns.shop", "extra"} }, "spec.profiles"},
		{"labels", key, func(w map[string]any) { w["metadata"].(map[string]any)["labels"].(map[string]any)["extra"] = "1" }, "metadata.labels.extra"},
		{"interface", key, func(w map[string]any) { w["spec"].(map[string]any)["interfaceName"] = "cali0000000000a" }, "spec.interfaceName"},
		{"node", key, func(w map[string]any) { w["spec"].(map[string]any)["node"] = "node2" }, "spec.node"},
		{"natting", key, func(w map[string]any) {
			w["spec"].(map[string]any)["ipNATs"] = []map[string]string{{"internalIP": "10.244.166.128", "externalIP": "172.16.0.1"}}
		}, "spec.ipNATs"},
		{"other node's name", model.Key{Kind: key.Kind, Namespace: key.Namespace, Name: "node2-k8s-web--1-eth0"}, func(w map[string]any) {
			w["metadata"].(map[string]any)["name"] = "node2-k8s-web--1-eth0"
		}, "metadata.name"},
	}
	for _, tc := range cases {
		w := decode(t, endpointWith(t, value, add))
		tc.edit(w)
		b, _ := json.Marshal(w)
		_, err := c.b.Create(context.Background(), tc.key, b)
		if err == nil || !strings.Contains(err.Error(), "field "+tc.field+" cannot be stored") {
			t.Errorf("%s: %v, want a refusal naming %s", tc.name, err, tc.field)
		}
	}
	if ann := podAnnotations(t, c); ann[derive.AnnotationContainerID] != "" {
		t.Errorf("refused writes left annotations %v", ann)
	}
	if p := patches(t, c); len(p) != 0 {
		t.Errorf("refused writes patched the pod: %v", p)
	}
}

// podAnnotations are pod shop/web-1's annotations as stored.
func podAnnotations(t *testing.T, c *cluster) map[string]string {
	t.Helper()
	ann, _ := c.raw(t, "/api/v1/namespaces/shop/pods/web-1")["metadata"].(map[string]any)["annotations"].(map[string]any)
	out := map[string]string{}
	for k, v := range ann {
		out[k], _ = v.(string)
	}
	return out
}

// patches are the audited pod status patches so far, as sent.
func patches(t *testing.T, c *cluster) []string {
	t.Helper()
	var out []string
	for _, ev := range c.requests(t, "pods") {
		if ev.Verb == "patch" && ev.ObjectRef.Subresource == "status" {
			out = append(out, string(ev.RequestObject))
		}
	}
	return out
}

// wantPatches fails unless the last pod status patch is want (JSON).
func wantPatches(t *testing.T, c *cluster, want string) {
	t.Helper()
	p := patches(t, c)
	if len(p) == 0 || !reflect.DeepEqual(decode(t, []byte(p[len(p)-1])), decode(t, []byte(want))) {
		t.Errorf("pod status patches %v, want the last to be %s", p, want)
	}
	if code, _ := c.kapi.Do(t, http.MethodGet, "/api/v1/namespaces/shop/pods/web-1", nil); code != http.StatusOK {
		t.Errorf("pod gone: %d", code)
	}
}
