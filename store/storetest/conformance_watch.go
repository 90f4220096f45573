package storetest

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/calico-aio/calico-aio/store"
)

// watchView is what a watcher built from its events.
type watchView struct {
	mu      sync.Mutex
	objs    map[store.Key]string
	synced  int
	deletes []store.Key
	bad     []string
}

func (v *watchView) handle(ev store.Event) {
	v.mu.Lock()
	defer v.mu.Unlock()
	switch ev.Type {
	case store.EventPut:
		if ev.Revision == "" {
			v.bad = append(v.bad, "put without revision: "+ev.Key.String())
		}
		v.objs[ev.Key] = string(ev.Value)
	case store.EventDelete:
		if _, ok := v.objs[ev.Key]; !ok {
			v.bad = append(v.bad, "delete of an object never delivered: "+ev.Key.String())
		}
		delete(v.objs, ev.Key)
		v.deletes = append(v.deletes, ev.Key)
	case store.EventSynced:
		v.synced++
	default:
		v.bad = append(v.bad, fmt.Sprintf("event type %v", ev.Type))
	}
}

func (v *watchView) snapshot() (map[store.Key]string, int, []store.Key, []string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return maps.Clone(v.objs), v.synced, append([]store.Key(nil), v.deletes...), append([]string(nil), v.bad...)
}

// startWatch watches opts until the test ends.
func startWatch(t *testing.T, b store.Backend, opts store.ListOptions) *watchView {
	v := &watchView{objs: map[store.Key]string{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Watch(ctx, opts, v.handle) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != context.Canceled {
			t.Errorf("watch %+v ended with %v, want context.Canceled", opts, err)
		}
	})
	return v
}

// listed is what a fresh list of opts holds.
func listed(t testing.TB, b store.Backend, opts store.ListOptions) map[store.Key]string {
	t.Helper()
	objs, _, err := b.List(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	m := map[store.Key]string{}
	for _, o := range objs {
		m[o.Key] = string(o.Value)
	}
	return m
}

func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// watchSelections are one selection per kind class the samples cover.
var watchSelections = []store.ListOptions{
	{Kind: "IPPool"},
	{Kind: "NetworkPolicy", Namespace: "ns1"},
	{Kind: store.KindIPAMBlock},
	{Kind: store.KindBlockAffinity, Node: "node-a"},
	{Kind: store.KindIPAMHandle},
	{Kind: store.KindIPAMConfig},
}

// churn updates every sample to version 2, then deletes the ones it
// deletes (every other one), and reports the keys deleted.
func churn(t testing.TB, b store.Backend) map[store.Key]bool {
	t.Helper()
	ctx := context.Background()
	deleted := map[store.Key]bool{}
	for i, s := range samples() {
		o, err := b.Get(ctx, s.key)
		if err != nil {
			t.Fatal(err)
		}
		rev, err := b.Update(ctx, s.key, s.value(2), o.Revision)
		if err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			if err := b.Delete(ctx, s.key, rev); err != nil {
				t.Fatal(err)
			}
			deleted[s.key] = true
		}
	}
	return deleted
}

func checkWatch(t *testing.T, b store.Backend) {
	storeAll(t, b)
	views := make([]*watchView, len(watchSelections))
	for i, opts := range watchSelections {
		views[i] = startWatch(t, b, opts)
	}
	for i, opts := range watchSelections {
		want := listed(t, b, opts)
		eventually(t, fmt.Sprintf("the initial list of %+v", opts), func() bool {
			m, synced, _, _ := views[i].snapshot()
			return synced == 1 && maps.Equal(m, want)
		})
	}
	deleted := churn(t, b)
	for i, opts := range watchSelections {
		want := listed(t, b, opts)
		eventually(t, fmt.Sprintf("the changes to %+v", opts), func() bool {
			m, _, _, _ := views[i].snapshot()
			return maps.Equal(m, want)
		})
		_, synced, dels, bad := views[i].snapshot()
		if synced != 1 || len(bad) > 0 {
			t.Errorf("watch %+v: synced %d times (want 1), bad events %v", opts, synced, bad)
		}
		for _, k := range dels {
			if !deleted[k] {
				t.Errorf("watch %+v: delete of %s, which was not deleted", opts, k)
			}
		}
	}
}

// A watch cut off by a datastore restart resumes where it was: it
// delivers what changed after, deletes included, without listing again.
func checkWatchResumes(t *testing.T, s Subject) {
	storeAll(t, s.Backend)
	opts := store.ListOptions{Kind: store.KindBlockAffinity}
	v := startWatch(t, s.Backend, opts)
	eventually(t, "the initial list", func() bool { _, synced, _, _ := v.snapshot(); return synced == 1 })
	s.Restart(t)
	churn(t, s.Backend)
	want := listed(t, s.Backend, opts)
	eventually(t, "the changes after the restart", func() bool { m, _, _, _ := v.snapshot(); return maps.Equal(m, want) })
	_, synced, dels, bad := v.snapshot()
	if synced != 1 || len(bad) > 0 {
		t.Errorf("synced %d times (want 1: resumed, not re-listed), bad events %v", synced, bad)
	}
	if len(dels) == 0 {
		t.Errorf("no deletes delivered after the restart")
	}
}
