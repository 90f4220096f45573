package k8s_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/calico-aio/calico-aio/e2e/kubeapi"
	"github.com/calico-aio/calico-aio/k8s"
	"github.com/calico-aio/calico-aio/store/storetest"
)

// followLog records what Follow delivered.
type followLog struct {
	mu     sync.Mutex
	events []string // "put ns/name", "delete ns/name", "synced"
}

func (l *followLog) add(ev k8s.FollowEvent) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch ev.Type {
	case k8s.FollowPut:
		l.events = append(l.events, "put "+ev.Namespace+"/"+ev.Name)
	case k8s.FollowDelete:
		l.events = append(l.events, "delete "+ev.Namespace+"/"+ev.Name)
	case k8s.FollowSynced:
		l.events = append(l.events, "synced")
	}
}

func (l *followLog) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.events)
}

// waitFor waits until the log ends with want.
func (l *followLog) waitFor(t *testing.T, want ...string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := l.get()
		if len(got) >= len(want) && slices.Equal(got[len(got)-len(want):], want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("events %v, want them to end with %v", got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestFollowResumesAcrossRestart follows NetworkPolicies on a real
// kube-apiserver: the list, then each change once; across an API server
// restart the watch resumes from its resourceVersion: no second list
// (one "synced"), no object delivered again, the changes made after the
// restart delivered.
func TestFollowResumesAcrossRestart(t *testing.T) {
	// Without its watch cache a restarted apiserver serves a watch from
	// any revision etcd still holds; with it, a lone apiserver may answer
	// 410 to a revision from before the restart (store/kube
	// TestWatchCachedRestart), and Follow then lists again.
	kapi := kubeapi.Start(t, storetest.StartEtcd(t).Endpoints()[0], kubeapi.WithArgs("--watch-cache=false"))
	kc, err := k8s.NewClient(kapi.KubeconfigPath)
	if err != nil {
		t.Fatal(err)
	}
	path := "/apis/networking.k8s.io/v1/namespaces/default/networkpolicies"
	create := func(name string) {
		t.Helper()
		if code, body := kapi.Do(t, http.MethodPost, path, map[string]any{"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
			"metadata": map[string]any{"name": name}, "spec": map[string]any{"podSelector": map[string]any{}}}); code != http.StatusCreated {
			t.Fatalf("creating %s: %d %s", name, code, body)
		}
	}
	create("a")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	log := &followLog{}
	go func() { done <- kc.Follow(ctx, k8s.WatchNetworkPolicies, log.add) }()
	stopped := false
	defer func() {
		if !stopped {
			cancel()
			<-done
		}
	}()
	log.waitFor(t, "put default/a", "synced")
	create("b")
	log.waitFor(t, "put default/b")
	kapi.Restart(t)
	create("c")
	if code, body := kapi.Do(t, http.MethodDelete, path+"/a", nil); code != http.StatusOK {
		t.Fatalf("deleting a: %d %s", code, body)
	}
	log.waitFor(t, "put default/c", "delete default/a")
	if got, want := fmt.Sprint(log.get()), "[put default/a synced put default/b put default/c delete default/a]"; got != want {
		t.Errorf("events %s, want %s (resumed, not listed again)", got, want)
	}
	cancel()
	stopped = true
	if err := <-done; err != context.Canceled {
		t.Errorf("Follow returned %v, want context.Canceled", err)
	}
}
