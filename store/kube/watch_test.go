package kube_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/calico-aio/calico-aio/e2e/kubeapi"
	"github.com/calico-aio/calico-aio/store/model"
)

// view is what a watcher built from its events.
type view struct {
	mu      sync.Mutex
	objs    map[model.Key]string
	puts    map[model.Key][]model.Revision // every revision delivered
	deletes []model.Key
	synced  int
	bad     []string
	gate    *gate // the next event waits for it
}

// gate holds a watcher inside its handler: held closes when it is there,
// and it goes on when release is closed.
type gate struct{ held, release chan struct{} }

func newView() *view {
	return &view{objs: map[model.Key]string{}, puts: map[model.Key][]model.Revision{}}
}

func (v *view) handle(ev model.Event) {
	v.mu.Lock()
	g := v.gate
	v.gate = nil
	v.mu.Unlock()
	if g != nil {
		close(g.held)
		<-g.release
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	switch ev.Type {
	case model.EventPut:
		v.objs[ev.Key] = string(ev.Value)
		v.puts[ev.Key] = append(v.puts[ev.Key], ev.Revision)
	case model.EventDelete:
		if _, ok := v.objs[ev.Key]; !ok {
			v.bad = append(v.bad, "delete of an object never delivered: "+ev.Key.String())
		}
		delete(v.objs, ev.Key)
		v.deletes = append(v.deletes, ev.Key)
	case model.EventSynced:
		v.synced++
	default:
		v.bad = append(v.bad, fmt.Sprintf("event type %v", ev.Type))
	}
}

// hold makes the next event wait in the handler until released.
func (v *view) hold() *gate {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.gate = &gate{held: make(chan struct{}), release: make(chan struct{})}
	return v.gate
}

func (v *view) state() (objs map[model.Key]string, synced int, bad []string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return maps.Clone(v.objs), v.synced, slices.Clone(v.bad)
}

func (v *view) revisions(k model.Key) []model.Revision {
	v.mu.Lock()
	defer v.mu.Unlock()
	return slices.Clone(v.puts[k])
}

// startWatch watches opts until the test ends.
func startWatch(t *testing.T, c *cluster, opts model.ListOptions) *view {
	v := newView()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.b.Watch(ctx, opts, v.handle) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != context.Canceled {
			t.Errorf("watch %+v ended with %v, want context.Canceled", opts, err)
		}
	})
	return v
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// affinities are node's affinities for n blocks of 10.66.i.0/26.
func affinities(node string, n int) []sample {
	out := make([]sample, n)
	for i := range out {
		out[i] = affinitySample(node, fmt.Sprintf("10.66.%d.0/26", i))
	}
	return out
}

// churned is what churn wrote: every revision each key had, and the
// values left (deleted keys absent).
type churned struct {
	revs  map[model.Key][]model.Revision
	final map[model.Key]string
}

// churn updates every sample three times, then deletes every other one.
func churn(t *testing.T, c *cluster, ss []sample, revs map[model.Key]model.Revision) churned {
	t.Helper()
	ctx := context.Background()
	out := churned{revs: map[model.Key][]model.Revision{}, final: map[model.Key]string{}}
	for i, s := range ss {
		rev := revs[s.key]
		for v := 2; v <= 4; v++ {
			var err error
			if rev, err = c.b.Update(ctx, s.key, s.value(v), rev); err != nil {
				t.Fatal(err)
			}
			out.revs[s.key] = append(out.revs[s.key], rev)
		}
		if i%2 == 0 {
			if err := c.b.Delete(ctx, s.key, rev); err != nil {
				t.Fatal(err)
			}
			continue
		}
		out.final[s.key] = string(s.value(4))
	}
	return out
}

// createAll creates every sample at version 1.
func createAll(t *testing.T, c *cluster, ss []sample) map[model.Key]model.Revision {
	revs := map[model.Key]model.Revision{}
	for _, s := range ss {
		revs[s.key] = mustCreate(t, c.b, s, 1)
	}
	return revs
}

// TestWatch: a watch delivers the list, EventSynced, then every change; a
// watch cut by an API server restart resumes from the last
// resourceVersion it saw, without listing again and without losing an
// event; only 410 Gone makes it list again and deliver the difference.
//
// The API server runs without its watch cache: a restarted server's cache
// starts at the current revision and answers 410 to any older one, so
// against a single restarted server with a cache every client re-lists
// (what the Gone case shows); with the cache off, watches are served from
// etcd's history, as across a restart of one of several servers.
func TestWatch(t *testing.T) {
	t.Parallel()
	c := startCluster(t, kubeapi.WithArgs("--watch-cache=false"))
	t.Run("ListsThenFollows", func(t *testing.T) { checkWatchFollows(t, c) })
	t.Run("ResumesAcrossRestart", func(t *testing.T) { checkWatchResumes(t, c) })
	t.Run("RelistsOnGone", func(t *testing.T) { checkWatchRelists(t, c) })
}

func checkWatchFollows(t *testing.T, c *cluster) {
	ss := append(affinities("wf-node", 4), affinities("wf-other", 1)...)
	revs := createAll(t, c, ss)
	v := startWatch(t, c, model.ListOptions{Kind: model.KindBlockAffinity, Node: "wf-node"})
	eventually(t, "the initial list", func() bool { objs, synced, _ := v.state(); return synced == 1 && len(objs) == 4 })
	ch := churn(t, c, ss[:4], revs)
	eventually(t, "the changes", func() bool { objs, _, _ := v.state(); return maps.Equal(objs, ch.final) })
	_, synced, bad := v.state()
	if synced != 1 || len(bad) > 0 {
		t.Errorf("synced %d times (want 1), bad events %v", synced, bad)
	}
}

// settle holds the watcher in its handler for one more change, so that
// what happens next happens while its watch is not being read.
func settle(t *testing.T, c *cluster, v *view, s sample, rev model.Revision) (*gate, model.Revision) {
	t.Helper()
	g := v.hold()
	rev, err := c.b.Update(context.Background(), s.key, s.value(9), rev)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-g.held:
	case <-time.After(30 * time.Second):
		t.Fatal("the watcher did not deliver the change")
	}
	return g, rev
}

func checkWatchResumes(t *testing.T, c *cluster) {
	v, ch, lists := watchAcrossRestart(t, c, "wr-node")
	_, synced, bad := v.state()
	if synced != 1 || len(bad) > 0 {
		t.Errorf("synced %d times (want 1: resumed, not listed again), bad events %v", synced, bad)
	}
	if n := c.lists(t, "blockaffinities"); n != lists {
		t.Errorf("%d list requests after the restart, want none", n-lists)
	}
	for k, want := range ch.revs {
		if got := v.revisions(k); !containsAll(got, want) {
			t.Errorf("%s: revisions delivered %v, want every one written %v", k, got, want)
		}
	}
}

func checkWatchRelists(t *testing.T, c *cluster) {
	ss := affinities("wg-node", 4)
	revs := createAll(t, c, ss)
	v := startWatch(t, c, model.ListOptions{Kind: model.KindBlockAffinity, Node: "wg-node"})
	eventually(t, "the initial list", func() bool { _, synced, _ := v.state(); return synced == 1 })
	g, rev := settle(t, c, v, ss[0], revs[ss[0].key])
	revs[ss[0].key] = rev
	lists := c.lists(t, "blockaffinities")
	c.kapi.Restart(t)
	ch := churn(t, c, ss, revs)
	c.compactEtcd(t)
	close(g.release)
	eventually(t, "the state after the re-list", func() bool { objs, synced, _ := v.state(); return synced == 2 && maps.Equal(objs, ch.final) })
	_, _, bad := v.state()
	if len(bad) > 0 {
		t.Errorf("bad events %v", bad)
	}
	if n := c.lists(t, "blockaffinities"); n != lists+1 {
		t.Errorf("%d list requests after the revision was gone, want 1", n-lists)
	}
}

func containsAll(got, want []model.Revision) bool {
	for _, w := range want {
		if !slices.Contains(got, w) {
			return false
		}
	}
	return true
}

// TestWatchCachedRestart: with the API server's watch cache on (as in
// real clusters) a single server's restart loses the history its cache
// had: the watch is answered 410, lists once and converges on the state,
// deletes included.
func TestWatchCachedRestart(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	v, _, lists := watchAcrossRestart(t, c, "wc-node")
	_, synced, bad := v.state()
	n := c.lists(t, "blockaffinities") - lists
	t.Logf("after the restart: %d list requests, synced %d times", n, synced)
	if len(bad) > 0 || n > 1 || synced != 1+n {
		t.Errorf("%d list requests (want at most 1), synced %d times, bad events %v", n, synced, bad)
	}
}

// watchAcrossRestart watches node's four affinities until the initial
// list and one settled change are in, restarts the apiserver, changes
// the affinities (creates, updates, deletes) and waits until the watch
// shows the result. It returns the watch, the changes and the number of
// list requests made before the restart.
func watchAcrossRestart(t *testing.T, c *cluster, node string) (*view, churned, int) {
	t.Helper()
	ss := affinities(node, 4)
	revs := createAll(t, c, ss)
	v := startWatch(t, c, model.ListOptions{Kind: model.KindBlockAffinity, Node: node})
	eventually(t, "the initial list", func() bool { _, synced, _ := v.state(); return synced == 1 })
	g, rev := settle(t, c, v, ss[0], revs[ss[0].key])
	revs[ss[0].key] = rev
	lists := c.lists(t, "blockaffinities")
	c.kapi.Restart(t)
	ch := churn(t, c, ss, revs)
	close(g.release)
	eventually(t, "the changes made after the restart", func() bool { objs, _, _ := v.state(); return maps.Equal(objs, ch.final) })
	return v, ch, lists
}
