package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/calico-aio/calico-aio/k8s"
	"github.com/calico-aio/calico-aio/store"
	"github.com/calico-aio/calico-aio/store/api"
	"github.com/calico-aio/calico-aio/store/storetest"
)

// fakeKube is a stateful fake of the Kubernetes API: lists and GETs answer
// from the same objects; the err fields make calls fail.
type fakeKube struct {
	mu    sync.Mutex
	nss   []k8s.Namespace
	sas   []k8s.ServiceAccount
	nps   []k8s.NetworkPolicy
	pods  []k8s.Pod
	nodes []k8s.Node
	eps   []k8s.EndpointSlice
	err   error // ListNamespaces
	// listSlicesErr fails ListEndpointSlices.
	listSlicesErr error
	// listPodsErr and listNodesErr fail those lists; getErr fails GETs.
	listPodsErr, listNodesErr, getErr error
	// hidden are objects a GET finds that the lists leave out (a list
	// taken just before they were created).
	hiddenPods  []k8s.Pod
	hiddenNodes []k8s.Node
	gets        int
	podLists    int // ListPods calls
}

func (f *fakeKube) ListNamespaces(context.Context) ([]k8s.Namespace, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.nss), f.err
}

func (f *fakeKube) ListServiceAccounts(context.Context) ([]k8s.ServiceAccount, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.sas), nil
}

func (f *fakeKube) ListNetworkPolicies(context.Context) ([]k8s.NetworkPolicy, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.nps), nil
}

func (f *fakeKube) ListEndpointSlices(context.Context) ([]k8s.EndpointSlice, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.listSlicesErr != nil {
		return nil, f.listSlicesErr
	}
	return slices.Clone(f.eps), nil
}

func (f *fakeKube) ListPods(context.Context) ([]k8s.Pod, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.podLists++
	if f.listPodsErr != nil {
		return nil, f.listPodsErr
	}
	return slices.Clone(f.pods), nil
}

func (f *fakeKube) ListNodes(context.Context) ([]k8s.Node, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.listNodesErr != nil {
		return nil, f.listNodesErr
	}
	return slices.Clone(f.nodes), nil
}

func (f *fakeKube) GetPod(_ context.Context, ns, name string) (*k8s.Pod, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gets++
	if f.getErr != nil {
		return nil, f.getErr
	}
	for _, p := range slices.Concat(f.pods, f.hiddenPods) {
		if p.Metadata.Namespace == ns && p.Metadata.Name == name {
			return &p, nil
		}
	}
	return nil, fmt.Errorf("pod %s/%s %w", ns, name, k8s.ErrNotFound)
}

func (f *fakeKube) GetNode(_ context.Context, name string) (*k8s.Node, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gets++
	if f.getErr != nil {
		return nil, f.getErr
	}
	for _, n := range slices.Concat(f.nodes, f.hiddenNodes) {
		if n.Metadata.Name == name {
			return &n, nil
		}
	}
	return nil, fmt.Errorf("node %s %w", name, k8s.ErrNotFound)
}

// set changes the fake's state under its lock.
func (f *fakeKube) set(change func(f *fakeKube)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	change(f)
}

func TestSync(t *testing.T) {
	ctx := context.Background()
	cl := storetest.StartEtcd(t).Client(t)
	mine := profileKind.NewObject().(*api.Profile)
	mine.Metadata.Name = "mine"
	if _, err := cl.CreateResource(ctx, mine); err != nil {
		t.Fatal(err)
	}
	ns := k8s.Namespace{Metadata: k8s.ObjectMeta{Name: "shop", Labels: map[string]string{"team": "a"}}}
	sa := k8s.ServiceAccount{Metadata: k8s.ObjectMeta{Name: "api", Namespace: "shop"}}
	np := k8s.NetworkPolicy{Metadata: k8s.ObjectMeta{Name: "web", Namespace: "shop"}}
	f := &fakeKube{nss: []k8s.Namespace{ns}, sas: []k8s.ServiceAccount{sa}, nps: []k8s.NetworkPolicy{np}}
	c := newController(cl, f)
	c.Logf = t.Logf
	if err := c.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	get := func(k api.KindInfo, ns, name string) (api.Resource, error) { return cl.GetResource(ctx, k, ns, name) }
	p, err := get(profileKind, "", "kns.shop")
	if err != nil || p.(*api.Profile).Spec.LabelsToApply["pcns.team"] != "a" {
		t.Fatalf("kns.shop: %v %v", p, err)
	}
	if _, err := get(profileKind, "", "ksa.shop.api"); err != nil {
		t.Fatal(err)
	}
	pol, err := get(networkPolicyKind, "shop", "knp.default.web")
	if err != nil {
		t.Fatal(err)
	}

	// A second sync with nothing changed writes nothing.
	rev := pol.GetObjectMeta().ResourceVersion
	if err := c.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if pol, _ = get(networkPolicyKind, "shop", "knp.default.web"); pol.GetObjectMeta().ResourceVersion != rev {
		t.Errorf("unchanged policy rewritten: %s -> %s", rev, pol.GetObjectMeta().ResourceVersion)
	}

	// A failed list deletes nothing.
	f.err = errors.New("boom")
	if err := c.Sync(ctx); err == nil {
		t.Fatal("sync with a failing list succeeded")
	}
	f.err = nil

	// Gone objects are deleted; others are left alone.
	f.nss, f.sas, f.nps = nil, nil, nil
	if err := c.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	for _, k := range []struct {
		kind     api.KindInfo
		ns, name string
	}{{profileKind, "", "kns.shop"}, {profileKind, "", "ksa.shop.api"}, {networkPolicyKind, "shop", "knp.default.web"}} {
		if _, err := get(k.kind, k.ns, k.name); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s: %v, want not found", k.name, err)
		}
	}
	if _, err := get(profileKind, "", "mine"); err != nil {
		t.Errorf("profile mine: %v", err)
	}
}
