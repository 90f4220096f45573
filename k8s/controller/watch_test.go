package controller

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/calico-aio/calico-aio/k8s"
	"github.com/calico-aio/calico-aio/store/api"
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

// waitUntil polls cond every 5 ms, failing the test after 5 s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// stored says whether the datastore holds kind ns/name.
func stored(c *Controller, kind api.KindInfo, ns, name string) func() bool {
	return func() bool {
		_, err := c.store.GetResource(context.Background(), kind, ns, name)
		return err == nil
	}
}

func TestRunReactsToWatchEvents(t *testing.T) {
	// runWatching returns once the failed first watches were retried.
	w, c := runWatching(t, 0)
	w.set(func(f *fakeKube) {
		f.nps = []k8s.NetworkPolicy{{Metadata: k8s.ObjectMeta{Name: "web", Namespace: "shop"}}}
	})
	start := time.Now()
	w.notify(k8s.WatchNetworkPolicies)
	waitUntil(t, "policy written", stored(c, networkPolicyKind, "shop", "knp.default.web"))
	if d := time.Since(start); d > time.Second {
		t.Errorf("policy written %v after the event", d)
	}

	waitUntil(t, "namespace watch", func() bool { return w.notify(k8s.WatchNamespaces) })
	w.set(func(f *fakeKube) { f.nss = []k8s.Namespace{{Metadata: k8s.ObjectMeta{Name: "shop"}}} })
	w.notify(k8s.WatchNamespaces)
	waitUntil(t, "profile written", stored(c, profileKind, "", "kns.shop"))
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

// runWatching runs a controller over a watchingKube until the test ends
// and returns once its pod and policy watches are open.
func runWatching(t *testing.T, podEvery time.Duration) (*watchingKube, *Controller) {
	ctx, cancel := context.WithCancel(context.Background())
	cl := storetest.StartEtcd(t).Client(t)
	w := &watchingKube{fakeKube: &fakeKube{}, calls: map[string]int{}, changed: map[string]func(){}}
	c := newController(cl, w)
	c.Logf = t.Logf
	c.Resync = time.Hour
	c.PodSyncInterval = podEvery
	done := make(chan struct{})
	go func() { defer close(done); _ = c.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	waitUntil(t, "watches (re)started", func() bool { return w.notify(k8s.WatchPods) && w.notify(k8s.WatchNetworkPolicies) })
	return w, c
}

func (w *watchingKube) podLists() int {
	w.fakeKube.mu.Lock()
	defer w.fakeKube.mu.Unlock()
	return w.fakeKube.podLists
}

// A stream of pod events costs at most one pod-label pass per
// PodSyncInterval, and the last events are still acted on.
func TestPodEventsRateLimited(t *testing.T) {
	const every = 100 * time.Millisecond
	w, _ := runWatching(t, every)
	time.Sleep(2 * every)
	before := w.podLists()
	const burst = time.Second
	for start := time.Now(); time.Since(start) < burst; time.Sleep(5 * time.Millisecond) {
		w.notify(k8s.WatchPods)
	}
	atLast := w.podLists()
	passes := atLast - before
	t.Logf("%v of pod events: %d pod-label passes", burst, passes)
	// Each pass waits for the interval since the one before: a slow
	// machine makes fewer per interval, but the passes the set-up's events
	// and the failed first watches left pending can still land in the
	// window (a loaded machine measured 14 against 10 intervals); without
	// the limit there would be ~40.
	if most := int(burst/every) + 5; passes > most {
		t.Errorf("%d pod-label passes in %v, want at most %d", passes, burst, most)
	}
	waitUntil(t, "a pod-label pass for the last pod events", func() bool { return w.podLists() != atLast })
}

// Pod events held back do not hold back a policy event: with pod passes
// at most once an hour, a policy still lands.
func TestPolicyNotHeldBackByPodEvents(t *testing.T) {
	w, c := runWatching(t, time.Hour)
	for i := 0; i < 20; i++ {
		w.notify(k8s.WatchPods)
		time.Sleep(2 * time.Millisecond)
	}
	w.set(func(f *fakeKube) {
		f.nps = []k8s.NetworkPolicy{{Metadata: k8s.ObjectMeta{Name: "web", Namespace: "shop"}}}
	})
	w.notify(k8s.WatchPods)
	w.notify(k8s.WatchNetworkPolicies)
	waitUntil(t, "the policy, not held back by the pod pass", stored(c, networkPolicyKind, "shop", "knp.default.web"))
}
