package k8s

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
)

// FollowType says what a FollowEvent is.
type FollowType int

// The events Follow delivers.
const (
	FollowPut    FollowType = iota // an object was added or changed: Object is set
	FollowDelete                   // an object went away
	FollowSynced                   // the list is delivered (after each list)
)

// FollowEvent is one change Follow delivers: the object's namespace,
// name and, for FollowPut, its JSON.
type FollowEvent struct {
	Type            FollowType
	Namespace, Name string
	Object          []byte
}

// followBackoff bounds how long Follow waits before trying again.
const (
	minFollowBackoff = 100 * time.Millisecond
	maxFollowBackoff = 5 * time.Second
)

// follower is one Follow's state: the resource version of each object
// delivered and the resourceVersion to resume from ("" when a list is
// needed).
type follower struct {
	what  string
	known map[[2]string]string
	rv    string
	h     func(FollowEvent)
}

// Follow lists every object of kind what (a Watch* constant, all
// namespaces), delivers each as FollowPut and then FollowSynced, and
// follows every change from the list's resourceVersion until ctx ends.
// A watch the server closes, or a connection that drops (an API server
// restart), resumes from the last resourceVersion seen (bookmarks
// included), retrying with backoff; only when the server answers 410 Gone
// does Follow list again, delivering the difference (puts for what
// changed, deletes for what vanished) and FollowSynced. It returns
// ctx's error.
func (c *Client) Follow(ctx context.Context, what string, h func(FollowEvent)) error {
	if _, ok := watchable[what]; !ok {
		return fmt.Errorf("following %s: not a kind the client watches", what)
	}
	f := &follower{what: what, known: map[[2]string]string{}, h: h}
	backoff := minFollowBackoff
	for {
		var err error
		if f.rv == "" {
			err = c.followList(ctx, f)
		} else {
			err = c.followWatch(ctx, f)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		switch {
		case err == nil:
			backoff = minFollowBackoff
			continue
		case errors.Is(err, ErrExpired):
			slog.Info("watch: resourceVersion gone, listing again", "kind", what)
			f.rv = ""
			continue
		}
		level := slog.LevelDebug
		if backoff == maxFollowBackoff {
			level = slog.LevelWarn
		}
		slog.Log(ctx, level, "watch interrupted, resuming", "kind", what, "resourceVersion", f.rv, "err", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, maxFollowBackoff)
	}
}

// followList lists f's kind and delivers the difference from what was
// delivered, then FollowSynced.
func (c *Client) followList(ctx context.Context, f *follower) error {
	dyn, err := c.watchClient()
	if err != nil {
		return err
	}
	list, err := dyn.Resource(watchable[f.what]).List(ctx, metav1.ListOptions{})
	if err != nil {
		return c.classify("listing "+f.what, err)
	}
	seen := map[[2]string]bool{}
	for i := range list.Items {
		u := &list.Items[i]
		seen[[2]string{u.GetNamespace(), u.GetName()}] = true
		if err := f.put(u); err != nil {
			return err
		}
	}
	for k := range f.known {
		if !seen[k] {
			delete(f.known, k)
			f.h(FollowEvent{Type: FollowDelete, Namespace: k[0], Name: k[1]})
		}
	}
	f.h(FollowEvent{Type: FollowSynced})
	f.rv = list.GetResourceVersion()
	return nil
}

// put delivers u unless it was delivered at this resource version.
func (f *follower) put(u *unstructured.Unstructured) error {
	k := [2]string{u.GetNamespace(), u.GetName()}
	if f.known[k] == u.GetResourceVersion() {
		return nil
	}
	b, err := u.MarshalJSON()
	if err != nil {
		return fmt.Errorf("%s %s/%s: %w", f.what, k[0], k[1], err)
	}
	f.known[k] = u.GetResourceVersion()
	f.h(FollowEvent{Type: FollowPut, Namespace: k[0], Name: k[1], Object: b})
	return nil
}

// followWatch watches from f.rv and delivers each change until the watch
// ends (nil: resume), fails, or says the resource version is gone.
func (c *Client) followWatch(ctx context.Context, f *follower) error {
	dyn, err := c.watchClient()
	if err != nil {
		return err
	}
	w, err := dyn.Resource(watchable[f.what]).Watch(ctx, metav1.ListOptions{
		ResourceVersion: f.rv, AllowWatchBookmarks: true, TimeoutSeconds: watchTimeout()})
	if err != nil {
		_, err = c.watchError(f.what, f.rv, err)
		return err
	}
	defer w.Stop()
	onError := func(err error) error {
		_, err = c.watchError(f.what, f.rv, err)
		return err
	}
	return Drain(ctx, w, f.what, onError, func(t watch.EventType, u *unstructured.Unstructured) error {
		switch t {
		case watch.Deleted:
			k := [2]string{u.GetNamespace(), u.GetName()}
			if _, ok := f.known[k]; ok {
				delete(f.known, k)
				f.h(FollowEvent{Type: FollowDelete, Namespace: k[0], Name: k[1]})
			}
		case watch.Added, watch.Modified:
			if err := f.put(u); err != nil {
				return err
			}
		}
		f.rv = u.GetResourceVersion()
		return nil
	})
}
