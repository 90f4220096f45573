package controller

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/calico-aio/calico-aio/k8s"
	"github.com/calico-aio/calico-aio/store/storetest"
)

// watchingKube is a fakeKube whose watches the test drives: each kind's
// first watch fails, later ones stay open and report what notify says.
type watchingKube struct {
	*fakeKube
	mu      sync.Mutex
	calls   map[string]int
	changed map[string]func()
}

func (w *watchingKube) WatchChanges(ctx context.Context, what, rv string, changed func()) (string, error) {
	w.mu.Lock()
	w.calls[what]++
	first := w.calls[what] == 1
	if !first {
		w.changed[what] = changed
	}
	w.mu.Unlock()
	if first {
		return rv, errors.New("connection refused")
	}
	<-ctx.Done()
	return rv, ctx.Err()
}

func (w *watchingKube) notify(what string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if f := w.changed[what]; f != nil {
		f()
		return true
	}
	return false
}

func TestRunReactsToWatchEvents(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cl := storetest.StartEtcd(t).Client(t)
	w := &watchingKube{fakeKube: &fakeKube{}, calls: map[string]int{}, changed: map[string]func(){}}
	c := newController(cl, w)
	c.Logf = t.Logf
	c.Resync = time.Hour
	done := make(chan struct{})
	go func() { defer close(done); _ = c.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	// The failed first watch is retried.
	waitFor("watch restarted", func() bool { return w.notify(k8s.WatchNetworkPolicies) })

	w.set(func(f *fakeKube) {
		f.nps = []k8s.NetworkPolicy{{Metadata: k8s.ObjectMeta{Name: "web", Namespace: "shop"}}}
	})
	start := time.Now()
	w.notify(k8s.WatchNetworkPolicies)
	waitFor("policy written", func() bool {
		_, err := cl.GetResource(ctx, networkPolicyKind, "shop", "knp.default.web")
		return err == nil
	})
	if d := time.Since(start); d > time.Second {
		t.Errorf("policy written %v after the event", d)
	}

	waitFor("namespace watch", func() bool { return w.notify(k8s.WatchNamespaces) })
	w.set(func(f *fakeKube) { f.nss = []k8s.Namespace{{Metadata: k8s.ObjectMeta{Name: "shop"}}} })
	w.notify(k8s.WatchNamespaces)
	waitFor("profile written", func() bool {
		_, err := cl.GetResource(ctx, profileKind, "", "kns.shop")
		return err == nil
	})
}

func TestWaker(t *testing.T) {
	w := newWaker()
	w.mark(groupPods)
	w.mark(groupPolicies)
	select {
	case <-w.c:
	default:
		t.Fatal("no wake-up")
	}
	if g := w.take(); g != groupPods|groupPolicies {
		t.Errorf("take %b", g)
	}
	if g := w.take(); g != 0 {
		t.Errorf("second take %b", g)
	}
}
