package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/calico-aio/calico-aio/e2e/kubeapi"
	"github.com/calico-aio/calico-aio/k8s"
	"github.com/calico-aio/calico-aio/k8s/controller"
	"github.com/calico-aio/calico-aio/store"
	"github.com/calico-aio/calico-aio/store/api"
	"github.com/calico-aio/calico-aio/store/storetest"
)

// TestK8sController runs two kube-controllers instances under leader
// election against a real kube-apiserver and checks that the datastore
// follows namespaces, service accounts and NetworkPolicies, and that the
// second instance takes over when the leader stops.
func TestK8sController(t *testing.T) {
	calico := storetest.StartEtcd(t)
	cl := calico.Client(t)
	kapi := kubeapi.Start(t, storetest.StartEtcd(t).Endpoints()[0])

	do := func(method, path string, body any, want int) {
		t.Helper()
		if code, out := kapi.Do(t, method, path, body); code != want {
			t.Fatalf("%s %s: %d %s", method, path, code, out)
		}
	}
	nsObj := func(labels map[string]string) map[string]any {
		return map[string]any{"apiVersion": "v1", "kind": "Namespace",
			"metadata": map[string]any{"name": "shop", "labels": labels}}
	}
	npObj := map[string]any{"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
		"metadata": map[string]any{"name": "web", "namespace": "shop"},
		"spec": map[string]any{
			"podSelector": map[string]any{"matchLabels": map[string]any{"app": "web"}},
			"ingress": []any{map[string]any{
				"from":  []any{map[string]any{"podSelector": map[string]any{"matchLabels": map[string]any{"role": "fe"}}}},
				"ports": []any{map[string]any{"port": 80}}}},
		}}
	do(http.MethodPost, "/api/v1/namespaces", nsObj(map[string]string{"team": "a"}), http.StatusCreated)
	do(http.MethodPost, "/api/v1/namespaces/shop/serviceaccounts", map[string]any{"apiVersion": "v1", "kind": "ServiceAccount",
		"metadata": map[string]any{"name": "api", "labels": map[string]string{"tier": "back"}}}, http.StatusCreated)
	do(http.MethodPost, "/apis/networking.k8s.io/v1/namespaces/shop/networkpolicies", npObj, http.StatusCreated)

	// An object the controller must not touch.
	ctx := context.Background()
	other := ctlProfileKind().NewObject().(*api.Profile)
	other.Metadata.Name = "mine"
	if _, err := cl.CreateResource(ctx, other); err != nil {
		t.Fatal(err)
	}

	type inst struct {
		cancel context.CancelFunc
		done   chan struct{}
	}
	var mu sync.Mutex
	leader := ""
	start := func(id string) inst {
		c, err := controller.New(cl, kapi.KubeconfigPath)
		if err != nil {
			t.Fatal(err)
		}
		c.Resync = 300 * time.Millisecond
		c.Logf = func(format string, args ...any) {
			msg := fmt.Sprintf(format, args...)
			if msg == "kube-controllers "+id+": elected leader" {
				mu.Lock()
				leader = id
				mu.Unlock()
			}
			t.Log(msg)
		}
		cctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); _ = controller.RunElected(cctx, cl, id, c) }()
		return inst{cancel, done}
	}
	insts := map[string]inst{"a": start("a"), "b": start("b")}
	t.Cleanup(func() {
		for _, i := range insts {
			i.cancel()
			<-i.done
		}
	})

	waitFor := func(what string, cond func() error) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			err := cond()
			if err == nil {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %v", what, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	profileLabels := func(name string, want map[string]string) func() error {
		return func() error {
			r, err := cl.GetResource(ctx, ctlProfileKind(), "", name)
			if err != nil {
				return err
			}
			if got := r.(*api.Profile).Spec.LabelsToApply; !reflect.DeepEqual(got, want) {
				return fmt.Errorf("labelsToApply %v, want %v", got, want)
			}
			return nil
		}
	}
	policyIs := func(obj map[string]any) func() error {
		var np k8s.NetworkPolicy
		b, _ := json.Marshal(obj)
		if err := json.Unmarshal(b, &np); err != nil {
			t.Fatal(err)
		}
		want, err := k8s.NetworkPolicyToCalico(np)
		if err != nil {
			t.Fatal(err)
		}
		want.Default()
		return func() error {
			r, err := cl.GetResource(ctx, ctlPolicyKind(), "shop", "knp.default.web")
			if err != nil {
				return err
			}
			got := r.(*api.NetworkPolicy)
			if !reflect.DeepEqual(got.Spec, want.Spec) {
				g, _ := json.Marshal(got.Spec)
				w, _ := json.Marshal(want.Spec)
				return fmt.Errorf("spec %s, want %s", g, w)
			}
			return nil
		}
	}

	waitFor("kns.shop", profileLabels("kns.shop", map[string]string{"pcns.team": "a", "pcns.projectcalico.org/name": "shop", "pcns.kubernetes.io/metadata.name": "shop"}))
	waitFor("ksa.shop.api", profileLabels("ksa.shop.api", map[string]string{"pcsa.tier": "back", "pcsa.projectcalico.org/name": "api"}))
	waitFor("knp.default.web", policyIs(npObj))

	// Updates follow.
	do(http.MethodPut, "/api/v1/namespaces/shop", nsObj(map[string]string{"team": "b"}), http.StatusOK)
	npObj["spec"].(map[string]any)["podSelector"] = map[string]any{"matchLabels": map[string]any{"app": "web2"}}
	do(http.MethodPut, "/apis/networking.k8s.io/v1/namespaces/shop/networkpolicies/web", npObj, http.StatusOK)
	waitFor("kns.shop updated", profileLabels("kns.shop", map[string]string{"pcns.team": "b", "pcns.projectcalico.org/name": "shop", "pcns.kubernetes.io/metadata.name": "shop"}))
	waitFor("knp.default.web updated", policyIs(npObj))

	// Deletion follows.
	do(http.MethodDelete, "/apis/networking.k8s.io/v1/namespaces/shop/networkpolicies/web", nil, http.StatusOK)
	waitFor("knp.default.web deleted", func() error {
		_, err := cl.GetResource(ctx, ctlPolicyKind(), "shop", "knp.default.web")
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		return fmt.Errorf("still there (%v)", err)
	})

	// The leader stops; the other takes over and applies a further change.
	mu.Lock()
	first := leader
	mu.Unlock()
	if first == "" {
		t.Fatal("no leader elected")
	}
	insts[first].cancel()
	<-insts[first].done
	delete(insts, first)
	stopped := time.Now()
	do(http.MethodPut, "/api/v1/namespaces/shop", nsObj(map[string]string{"team": "c"}), http.StatusOK)
	waitFor("kns.shop updated by the new leader", profileLabels("kns.shop", map[string]string{"pcns.team": "c", "pcns.projectcalico.org/name": "shop", "pcns.kubernetes.io/metadata.name": "shop"}))
	mu.Lock()
	second := leader
	mu.Unlock()
	if second == first {
		t.Fatalf("leader still %s after it stopped", first)
	}
	t.Logf("%s took over from %s in %v", second, first, time.Since(stopped).Round(time.Millisecond))

	if _, err := cl.GetResource(ctx, ctlProfileKind(), "", "mine"); err != nil {
		t.Errorf("profile mine: %v", err)
	}
}

func ctlProfileKind() api.KindInfo { k, _ := api.LookupKind("Profile"); return k }
func ctlPolicyKind() api.KindInfo  { k, _ := api.LookupKind("NetworkPolicy"); return k }
