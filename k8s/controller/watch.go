package controller

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/calico-aio/calico-aio/k8s"
)

// watcher is a lister that can also watch (k8s.Client.WatchChanges).
type watcher interface {
	WatchChanges(ctx context.Context, what, rv string, changed func()) (string, error)
}

// watches maps each watched kind to the group its changes affect.
var watches = []struct {
	what string
	g    group
}{
	{k8s.WatchNamespaces, groupProfiles},
	{k8s.WatchServiceAccounts, groupProfiles},
	{k8s.WatchNetworkPolicies, groupPolicies},
	{k8s.WatchPods, groupPods},
	{k8s.WatchEndpointSlices, groupServices},
	{k8s.WatchNodes, groupNodeLabels},
}

// Watch restart backoff: a watch that fails, or ends sooner than
// minWatchLife, is restarted after a delay that doubles up to the max.
const (
	minWatchBackoff = 100 * time.Millisecond
	maxWatchBackoff = 10 * time.Second
	minWatchLife    = time.Second
)

// waker collects the groups the watches marked dirty and wakes the loop;
// it never blocks a watch.
type waker struct {
	dirty atomic.Uint32
	c     chan struct{}
}

func newWaker() *waker { return &waker{c: make(chan struct{}, 1)} }

// mark adds g to the dirty groups and wakes the loop.
func (w *waker) mark(g group) {
	w.dirty.Or(uint32(g))
	select {
	case w.c <- struct{}{}:
	default:
	}
}

// take returns the dirty groups and clears them.
func (w *waker) take() group { return group(w.dirty.Swap(0)) }

// startWatches runs one goroutine per watched kind until ctx ends.
func (c *Controller) startWatches(ctx context.Context, wg *sync.WaitGroup, w watcher, wake *waker) {
	for _, wt := range watches {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.watchLoop(ctx, w, wt.what, func() { wake.mark(wt.g) })
		}()
	}
}

// watchLoop keeps a watch of kind what open, resuming from the last
// resource version seen, until ctx ends. After a failure it marks the
// group dirty (events may have been missed) and backs off.
func (c *Controller) watchLoop(ctx context.Context, w watcher, what string, changed func()) {
	rv := ""
	backoff := minWatchBackoff
	for ctx.Err() == nil {
		started := time.Now()
		next, err := w.WatchChanges(ctx, what, rv, changed)
		if ctx.Err() != nil {
			return
		}
		rv = next
		if err != nil {
			changed()
			if !errors.Is(err, k8s.ErrExpired) {
				c.logf("kube-controllers: %v (retrying in %v)", err, backoff)
			}
		}
		if err == nil && time.Since(started) >= minWatchLife {
			backoff = minWatchBackoff
			continue
		}
		sleep(ctx, backoff)
		backoff = min(2*backoff, maxWatchBackoff)
	}
}
