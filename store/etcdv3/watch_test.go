package etcdv3_test

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/calico-aio/calico-aio/store"
	"github.com/calico-aio/calico-aio/store/embedded"
	"github.com/calico-aio/calico-aio/store/etcdv3"
	"github.com/calico-aio/calico-aio/store/storetest"
)

// view is what a watcher has built from the events it was given.
type view struct {
	mu      sync.Mutex
	kv      map[string]string
	synced  int
	deletes []string
}

func (v *view) handle(ev etcdv3.RawEvent) {
	v.mu.Lock()
	defer v.mu.Unlock()
	switch ev.Type {
	case store.EventPut:
		v.kv[ev.Key] = string(ev.Value)
	case store.EventDelete:
		if _, ok := v.kv[ev.Key]; !ok {
			panic("delete of a key never delivered: " + ev.Key)
		}
		delete(v.kv, ev.Key)
		v.deletes = append(v.deletes, ev.Key)
	case store.EventSynced:
		v.synced++
	}
}

func (v *view) snapshot() (map[string]string, int) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return maps.Clone(v.kv), v.synced
}

func fresh(t *testing.T, c *etcdv3.Backend, prefix string) map[string]string {
	t.Helper()
	kvs, _, err := c.ListPrefix(context.Background(), prefix)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, kv := range kvs {
		m[kv.Key] = string(kv.Value)
	}
	return m
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func put(t *testing.T, c *etcdv3.Backend, k, v string) {
	t.Helper()
	kv, err := c.GetKey(context.Background(), k)
	if err != nil {
		_, err = c.CreateKey(context.Background(), k, []byte(v))
	} else {
		_, err = c.UpdateKey(context.Background(), k, []byte(v), kv.Revision)
	}
	if err != nil {
		t.Fatal(err)
	}
}

func TestWatchDeliversListThenChanges(t *testing.T) {
	e := storetest.StartEtcd(t)
	c := e.Backend(t)
	put(t, c, "/w/a", "1")
	put(t, c, "/other", "x")
	v := &view{kv: map[string]string{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- c.WatchPrefix(ctx, "/w/", v.handle) }()
	waitFor(t, "first sync", func() bool { _, s := v.snapshot(); return s == 1 })
	put(t, c, "/w/b", "2")
	put(t, c, "/w/a", "3")
	if err := c.DeleteKey(context.Background(), "/w/b", 0); err != nil {
		t.Fatal(err)
	}
	put(t, c, "/w/c", "4")
	want := map[string]string{"/w/a": "3", "/w/c": "4"}
	waitFor(t, "changes", func() bool { m, _ := v.snapshot(); return maps.Equal(m, want) })
	cancel()
	<-done
}

// The watcher survives its etcd going away, history being compacted past
// what it saw, and the server coming back: it ends with the same view as a
// fresh list, with deletes for keys that vanished while it was cut off.
func TestWatchSurvivesCompactionAndRestart(t *testing.T) {
	e := storetest.StartEtcd(t)
	c := e.Backend(t)
	for i := 0; i < 5; i++ {
		put(t, c, fmt.Sprintf("/w/k%d", i), "v0")
	}
	v := &view{kv: map[string]string{}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- c.WatchPrefix(ctx, "/w/", v.handle) }()
	waitFor(t, "first sync", func() bool { _, s := v.snapshot(); return s == 1 })

	// Take the member down and bring it back on another client port, where
	// the watcher cannot follow, then change and compact behind its back.
	e.Stop()
	hidden := e.Config
	alt, err := embedded.FreeLoopbackURL()
	if err != nil {
		t.Fatal(err)
	}
	hidden.ClientURL = alt
	side := &storetest.Etcd{Config: hidden}
	side.Restart(t)
	sc := side.Backend(t)
	put(t, sc, "/w/k1", "v1")                                              // changed
	put(t, sc, "/w/new", "n")                                              // added
	if err := sc.DeleteKey(context.Background(), "/w/k2", 0); err != nil { // vanished
		t.Fatal(err)
	}
	if err := sc.DeleteKey(context.Background(), "/w/k3", 0); err != nil {
		t.Fatal(err)
	}
	_, rev, err := sc.ListPrefix(context.Background(), "/")
	if err != nil {
		t.Fatal(err)
	}
	if err := sc.Compact(context.Background(), rev); err != nil {
		t.Fatal(err)
	}
	side.Stop()

	// Back on the original port: the watcher reconnects, finds its revision
	// compacted, re-lists and converges.
	e.Restart(t)
	put(t, c, "/w/k4", "v4") // a change after the restart, delivered normally
	want := fresh(t, c, "/w/")
	waitFor(t, "convergence after compaction and restart", func() bool {
		m, _ := v.snapshot()
		return maps.Equal(m, want)
	})
	_, syncs := v.snapshot()
	if syncs < 2 {
		t.Errorf("watcher re-synced %d times, want a re-list after compaction", syncs)
	}
	v.mu.Lock()
	dels := fmt.Sprint(v.deletes)
	v.mu.Unlock()
	if dels != "[/w/k2 /w/k3]" && dels != "[/w/k3 /w/k2]" {
		t.Errorf("deletes delivered = %s, want /w/k2 and /w/k3", dels)
	}
	cancel()
	if err := <-done; err != context.Canceled {
		t.Errorf("watch returned %v", err)
	}
}
