package kube

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/calico-aio/calico-aio/k8s"
	"github.com/calico-aio/calico-aio/store/kdd"
	"github.com/calico-aio/calico-aio/store/model"
)

// watchState is what one Watch has delivered: the revision of each object
// and the resourceVersion to resume from.
type watchState struct {
	sel   selection
	known map[model.Key]model.Revision
	rv    string // "" when a list is needed
	h     func(model.Event)
}

// maxBackoff is the longest a watch waits before trying again.
const maxBackoff = 5 * time.Second

// Watch lists what opts selects, then follows every change from the
// list's resourceVersion until ctx ends. A watch the server closes or the
// connection drops resumes from the last resourceVersion seen (bookmarks
// included), retrying with backoff while the server is unreachable; only
// when the server answers 410 Gone does Watch list again and deliver the
// difference (puts, and deletes for what vanished) and EventSynced.
func (b *Backend) Watch(ctx context.Context, opts model.ListOptions, h func(model.Event)) error {
	if opts.Kind == profileKind {
		return b.watchProfiles(ctx, opts, h)
	}
	sel, err := b.selectionOf(opts)
	if err != nil {
		return err
	}
	return b.watch(ctx, sel, h)
}

// watch follows one selection (Watch).
func (b *Backend) watch(ctx context.Context, sel selection, h func(model.Event)) error {
	dyn, err := b.client.WatchDynamic()
	if err != nil {
		return err
	}
	st := &watchState{sel: sel, known: map[model.Key]model.Revision{}, h: h}
	backoff := 100 * time.Millisecond
	for {
		if st.rv == "" {
			err = b.resync(ctx, st)
		} else {
			err = b.follow(ctx, st, sel.on(dyn))
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		switch {
		case err == nil:
			backoff = 100 * time.Millisecond
			continue
		case errors.Is(err, model.ErrRevisionGone):
			slog.Info("watch: resourceVersion gone, listing again", "kind", sel.kind.Kind, "resourceVersion", st.rv)
			st.rv = ""
			continue
		}
		if moved, ok := b.regroup(ctx, sel, err); ok {
			sel, st.sel, st.rv = moved, moved, ""
			continue
		}
		level := slog.LevelDebug
		if backoff == maxBackoff {
			level = slog.LevelWarn // failing for a while: say so
		}
		slog.Log(ctx, level, "watch interrupted, resuming", "kind", sel.kind.Kind, "resourceVersion", st.rv, "err", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, maxBackoff)
	}
}

// regroup is sel on the v3 CRDs when err says the server serves no v1
// resource for it and discovery, asked now (onGroup's rule), settles v3.
func (b *Backend) regroup(ctx context.Context, sel selection, err error) (selection, bool) {
	var nr *noResourceError
	if _, settled := b.groupNow(); settled || !errors.As(err, &nr) {
		return sel, false
	}
	if g, err := b.APIGroup(ctx); err != nil || g != kdd.APIGroupV3 {
		return sel, false
	}
	moved, err := b.selectionOf(sel.opts)
	return moved, err == nil
}

// resync lists the selection and delivers the difference from what was
// delivered, then EventSynced.
func (b *Backend) resync(ctx context.Context, st *watchState) error {
	seen := map[model.Key]bool{}
	rev, err := b.listPages(ctx, st.sel, func(o model.Object) {
		seen[o.Key] = true
		if st.known[o.Key] != o.Revision {
			st.known[o.Key] = o.Revision
			st.h(model.Event{Type: model.EventPut, Key: o.Key, Value: o.Value, Revision: o.Revision})
		}
	})
	if err != nil {
		return err
	}
	for k := range st.known {
		if !seen[k] {
			delete(st.known, k)
			st.h(model.Event{Type: model.EventDelete, Key: k, Revision: rev})
		}
	}
	st.h(model.Event{Type: model.EventSynced, Revision: rev})
	st.rv = string(rev)
	return nil
}

// follow watches from st.rv and delivers each change until the watch
// ends (nil: resume), fails, or says the revision is gone.
func (b *Backend) follow(ctx context.Context, st *watchState, api interface {
	Watch(context.Context, metav1.ListOptions) (watch.Interface, error)
}) error {
	w, err := api.Watch(ctx, metav1.ListOptions{
		LabelSelector:       st.sel.labels,
		ResourceVersion:     st.rv,
		AllowWatchBookmarks: true,
		TimeoutSeconds:      k8s.WatchTimeout(),
	})
	if err != nil {
		return b.watchError(st, err)
	}
	defer w.Stop()
	onError := func(err error) error { return b.watchError(st, err) }
	return k8s.Drain(ctx, w, st.sel.kind.Kind, onError, func(t watch.EventType, u *unstructured.Unstructured) error {
		b.deliver(st, t, u)
		st.rv = u.GetResourceVersion()
		return nil
	})
}

// deliver hands one watch event to the handler.
func (b *Backend) deliver(st *watchState, t watch.EventType, u *unstructured.Unstructured) {
	if t == watch.Bookmark {
		return
	}
	o, ok := b.readable(st.sel.src, u)
	if !ok || !st.sel.keep(o) {
		return
	}
	if t == watch.Deleted {
		b.forgetHandle(ref{kind: st.sel.kind, name: u.GetName()})
		if _, had := st.known[o.Key]; had {
			delete(st.known, o.Key)
			st.h(model.Event{Type: model.EventDelete, Key: o.Key, Revision: o.Revision})
		}
		return
	}
	st.known[o.Key] = o.Revision
	st.h(model.Event{Type: model.EventPut, Key: o.Key, Value: o.Value, Revision: o.Revision})
}

// watchError classifies a failed watch: ErrRevisionGone on 410.
func (b *Backend) watchError(st *watchState, err error) error {
	if apierrors.IsGone(err) || apierrors.IsResourceExpired(err) {
		return fmt.Errorf("watch %s from %s: %w", st.sel.kind.Kind, st.rv, &model.RevisionGoneError{Revision: model.Revision(st.rv)})
	}
	return b.apiError("watch", st.sel.key(), model.Revision(st.rv), err)
}
