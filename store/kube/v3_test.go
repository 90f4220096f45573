package kube_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/calico-aio/calico-aio/k8s"
	"github.com/calico-aio/calico-aio/store/apiconfig"
	"github.com/calico-aio/calico-aio/store/kdd"
	"github.com/calico-aio/calico-aio/store/kube"
	"github.com/calico-aio/calico-aio/store/model"
)

// crdsV3Path are Calico's resource kinds as native projectcalico.org/v3
// CRDs (build/crdgen -group projectcalico.org/v3).
const crdsV3Path = "testdata/crds-v3.yaml"

// discovering is a backend that discovers its CRD group at the first call.
func discovering(kubeconfig string) (*kube.Backend, error) {
	c, err := k8s.NewClient(kubeconfig)
	if err != nil {
		return nil, err
	}
	return kube.NewWithGroup(c, ""), nil
}

// TestAPIGroupV3 runs the backend on a kube-apiserver that serves Calico's
// kinds as native projectcalico.org/v3 CRDs only: it discovers that group,
// keeps the same contract there (compare-and-swap, typed errors, list,
// watch), writes the v3 object itself, and refuses IPAM by name. The last
// subtest installs the v1 CRDs too, after which Calico's rule picks v1.
func TestAPIGroupV3(t *testing.T) {
	t.Parallel()
	c := startClusterWith(t, crdsV3Path, discovering)
	c.namespace(t, "ns1")
	c.namespace(t, "ns2")
	if g, err := c.b.APIGroup(context.Background()); err != nil || g != kdd.APIGroupV3 {
		t.Fatalf("discovered %q, %v; want %s", g, err, kdd.APIGroupV3)
	}
	t.Run("CompareAndSwap", func(t *testing.T) {
		for _, s := range v3Samples("cas") {
			t.Run(s.key.String(), func(t *testing.T) { checkCASWith(t, c.b, s, sameModelV3) })
		}
	})
	t.Run("TheObjectIsTheCustomResource", func(t *testing.T) { checkV3Shape(t, c) })
	t.Run("ListAndWatch", func(t *testing.T) { checkV3ListWatch(t, c) })
	t.Run("WatchFirst", func(t *testing.T) { checkV3WatchFirst(t, c) })
	t.Run("IPAMRefused", func(t *testing.T) { checkV3IPAMRefused(t, c.b) })
	t.Run("CALICO_API_GROUP", func(t *testing.T) { checkGroupSetting(t, c) })
	t.Run("BothGroupsServedMeansV1", func(t *testing.T) {
		c.kapi.InstallCRDs(t, crdsPath)
		kc, err := k8s.NewClient(c.kapi.KubeconfigPath)
		if err != nil {
			t.Fatal(err)
		}
		var g kdd.APIGroup
		eventually(t, "crd.projectcalico.org in the API discovery", func() bool {
			g, err = kube.DiscoverAPIGroup(context.Background(), kc)
			return err == nil && g == kdd.APIGroupV1
		})
	})
}

// The rule itself, as Calico's components apply it to the served groups.
func TestChooseAPIGroup(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		served []string
		want   kdd.APIGroup
	}{
		{nil, kdd.APIGroupV1},
		{[]string{"apps", "crd.projectcalico.org"}, kdd.APIGroupV1},
		{[]string{"apps", "projectcalico.org"}, kdd.APIGroupV3},
		// The aggregated Calico API server serves projectcalico.org/v3 in
		// front of the v1 CRDs: they are read directly.
		{[]string{"crd.projectcalico.org", "projectcalico.org"}, kdd.APIGroupV1},
	} {
		if got := kube.ChooseAPIGroup(c.served); got != c.want {
			t.Errorf("%v: %s, want %s", c.served, got, c.want)
		}
	}
}

func v3Samples(p string) []sample {
	np := `{"tier":"default","order":100,"selector":"app == 'web'","types":["Ingress"],"ingress":[{"action":"Allow","protocol":"TCP","destination":{"ports":[80]}}]}`
	return []sample{
		resourceSample(model.Key{Kind: "IPPool", Name: p + "-pool"}, `{"cidr":"10.66.0.0/16","vxlanMode":"Never","ipipMode":"Never","natOutgoing":true,"blockSize":26,"nodeSelector":"all()","allowedUses":["Workload","Tunnel"],"assignmentMode":"Automatic"}`),
		resourceSample(model.Key{Kind: "NetworkPolicy", Namespace: "ns1", Name: "default." + p}, np),
		resourceSample(model.Key{Kind: "NetworkPolicy", Namespace: "ns2", Name: "default." + p}, np),
	}
}

// sameModelV3 is sameModel for v3: the uid, creationTimestamp and
// generation read back are the server's, so they are only checked to be
// there.
func sameModelV3(t *testing.T, what string, key model.Key, got, want []byte) {
	t.Helper()
	g, w := decode(t, got), decode(t, want)
	gm, wm := g["metadata"].(map[string]any), w["metadata"].(map[string]any)
	for _, f := range []string{"uid", "creationTimestamp", "generation"} {
		if gm[f] == nil {
			t.Errorf("%s: no metadata.%s", what, f)
		}
		delete(gm, f)
		delete(wm, f)
	}
	if jsonText(g) != jsonText(w) {
		t.Errorf("%s:\n got  %s\n want %s", what, jsonText(g), jsonText(w))
	}
}

// checkV3Shape: the custom resource stored is the v3 object (every label
// and annotation on it, no metadata annotation), and its uid is the
// model's as it is.
func checkV3Shape(t *testing.T, c *cluster) {
	ctx := context.Background()
	key := model.Key{Kind: "NetworkPolicy", Namespace: "ns1", Name: "default.shape"}
	v := `{"kind":"NetworkPolicy","apiVersion":"projectcalico.org/v3","metadata":{"name":"default.shape","namespace":"ns1","labels":{"app":"web","projectcalico.org/tier":"default"},"annotations":{"note":"kept"}},"spec":{"tier":"default","selector":"all()","types":["Ingress"]}}`
	if _, err := c.b.Create(ctx, key, []byte(v)); err != nil {
		t.Fatal(err)
	}
	cr := c.raw(t, "/apis/projectcalico.org/v3/namespaces/ns1/networkpolicies/default.shape")
	md := cr["metadata"].(map[string]any)
	if cr["apiVersion"] != "projectcalico.org/v3" || jsonText(md["labels"]) != `{"app":"web","projectcalico.org/tier":"default"}` || jsonText(md["annotations"]) != `{"note":"kept"}` {
		t.Errorf("custom resource %s", jsonText(cr))
	}
	o, err := c.b.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if got := decode(t, o.Value)["metadata"].(map[string]any)["uid"]; got != md["uid"] {
		t.Errorf("model uid %v, want the custom resource's %v", got, md["uid"])
	}
}

// checkV3ListWatch: a list and a watch of a kind see its v3 custom
// resources come and go.
func checkV3ListWatch(t *testing.T, c *cluster) {
	ctx := context.Background()
	opts := model.ListOptions{Kind: "NetworkPolicy", Namespace: "ns2"}
	v := startWatch(t, c, opts)
	ss := []sample{
		resourceSample(model.Key{Kind: "NetworkPolicy", Namespace: "ns2", Name: "default.lw-a"}, `{"tier":"default","selector":"all()"}`),
		resourceSample(model.Key{Kind: "NetworkPolicy", Namespace: "ns2", Name: "default.lw-b"}, `{"tier":"default","selector":"all()"}`),
	}
	revs := createAll(t, c, ss)
	objs, _, err := c.b.List(ctx, opts)
	if err != nil || len(objs) != 2 {
		t.Fatalf("list: %d objects, %v; want 2", len(objs), err)
	}
	if err := c.b.Delete(ctx, ss[0].key, revs[ss[0].key]); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the watch to see both created and one deleted", func() bool {
		objs, synced, bad := v.state()
		_, b := objs[ss[1].key]
		return synced > 0 && len(objs) == 1 && b && len(bad) == 0 && len(v.revisions(ss[0].key)) == 1
	})
}

// checkV3IPAMRefused: the IPAM kinds are refused on v3, naming the kind
// and the group.
func checkV3IPAMRefused(t *testing.T, b *kube.Backend) {
	ctx := context.Background()
	h := handleSample("k8s-pod-network.v3", "10.66.0.0/26")
	if _, err := b.Create(ctx, h.key, h.value(1)); err == nil || !strings.Contains(err.Error(), "IPAMHandle: IPAM is not served on the projectcalico.org/v3 CRDs") {
		t.Errorf("IPAMHandle create: %v", err)
	}
	if _, _, err := b.List(ctx, model.ListOptions{Kind: model.KindIPAMBlock}); err == nil || !strings.Contains(err.Error(), "IPAMBlock: IPAM is not served") {
		t.Errorf("IPAMBlock list: %v", err)
	}
}

// checkGroupSetting: through apiconfig, CALICO_API_GROUP forces a group
// (v1 here finds no v1 CRDs), unset lets the backend discover v3 at its
// first call, and a bad value is refused naming the variable.
func checkGroupSetting(t *testing.T, c *cluster) {
	ctx := context.Background()
	open := func(group string) (*kube.Backend, error) {
		env := map[string]string{"DATASTORE_TYPE": "kubernetes", "KUBECONFIG": c.kapi.KubeconfigPath, "CALICO_API_GROUP": group}
		h := apiconfig.Host{Getenv: func(k string) string { return env[k] }, ReadFile: os.ReadFile, ServiceAccountDir: t.TempDir()}
		cfg, err := apiconfig.FromEnv(h, apiconfig.EtcdFlags{})
		if err != nil {
			return nil, err
		}
		sc, _, err := apiconfig.OpenKube(cfg, h)
		if err != nil {
			return nil, err
		}
		return sc.Backend.(*kube.Backend), nil
	}
	pool := model.Key{Kind: "IPPool", Name: "forced"}
	for group, want := range map[string]kdd.APIGroup{"": kdd.APIGroupV3, "projectcalico.org/v3": kdd.APIGroupV3, "crd.projectcalico.org/v1": kdd.APIGroupV1} {
		b, err := open(group)
		if err != nil {
			t.Fatalf("CALICO_API_GROUP=%q: %v", group, err)
		}
		// Unset, the first call finds no v1 ippools, discovers v3 and
		// runs again there.
		_, err = b.Get(ctx, pool)
		if want == kdd.APIGroupV3 && !isNotFound(err, pool) || want == kdd.APIGroupV1 && (err == nil || !strings.Contains(err.Error(), "are Calico's CRDs installed?")) {
			t.Errorf("CALICO_API_GROUP=%q: get: %v", group, err)
		}
		if g, err := b.APIGroup(ctx); err != nil || g != want {
			t.Errorf("CALICO_API_GROUP=%q: group %q, %v; want %s", group, g, err, want)
		}
	}
	if _, err := open("projectcalico.org"); err == nil || !strings.Contains(err.Error(), `CALICO_API_GROUP="projectcalico.org": want crd.projectcalico.org/v1 or projectcalico.org/v3`) {
		t.Errorf("a bad CALICO_API_GROUP: %v", err)
	}
}

// checkNoDiscovery: on the v1 CRDs a backend with no group set works on
// v1 at once, with no discovery request (the CNI plugin's requests stay
// Calico's); it would ask only on finding no v1 resource.
func checkNoDiscovery(t *testing.T, c *cluster) {
	ctx := context.Background()
	b, err := discovering(c.kapi.KubeconfigPath)
	if err != nil {
		t.Fatal(err)
	}
	s := resourceSample(model.Key{Kind: "IPPool", Name: "no-discovery"}, `{"cidr":"10.67.0.0/16"}`)
	rev, err := b.Create(ctx, s.key, s.value(1))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Get(ctx, s.key); err != nil {
		t.Fatal(err)
	}
	if err := b.Delete(ctx, s.key, rev); err != nil {
		t.Fatal(err)
	}
	// Asked, it discovers v1: the one discovery request audited is that.
	if g, err := b.APIGroup(ctx); err != nil || g != kdd.APIGroupV1 {
		t.Errorf("discovered %q, %v; want %s", g, err, kdd.APIGroupV1)
	}
	eventually(t, "the discovery request in the audit log", func() bool { return discoveries(t, c) > 0 })
	if n := discoveries(t, c); n != 1 {
		t.Errorf("%d discovery requests audited, want only the one asked for", n)
	}
}

// discoveries counts the audited requests of /apis.
func discoveries(t *testing.T, c *cluster) int {
	n := 0
	for _, ev := range c.requests(t, "") {
		if path, _, _ := strings.Cut(ev.RequestURI, "?"); path == "/apis" {
			n++
		}
	}
	return n
}

// checkV3WatchFirst: a backend whose first call is a watch finds no v1
// resource, discovers v3 and follows the v3 custom resources.
func checkV3WatchFirst(t *testing.T, c *cluster) {
	b, err := discovering(c.kapi.KubeconfigPath)
	if err != nil {
		t.Fatal(err)
	}
	fresh := *c
	fresh.b = b
	v := startWatch(t, &fresh, model.ListOptions{Kind: "IPPool"})
	s := resourceSample(model.Key{Kind: "IPPool", Name: "watched-first"}, `{"cidr":"10.68.0.0/16"}`)
	if _, err := c.b.Create(context.Background(), s.key, s.value(1)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the watch to see the v3 IPPool", func() bool {
		objs, synced, _ := v.state()
		_, ok := objs[s.key]
		return ok && synced > 0
	})
}
