package etcdv3

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/calico-aio/calico-aio/store/model"
)

// RawEvent is one change under a watched raw prefix (WatchPrefix).
type RawEvent struct {
	Type     model.EventType
	Key      string
	Value    []byte // nil for deletes and sync markers
	Revision int64
}

// Watch follows what opts selects (model.Backend.Watch): the objects as
// puts, EventSynced, then every change.
func (c *Backend) Watch(ctx context.Context, opts model.ListOptions, h func(model.Event)) error {
	prefix, err := listPrefix(opts)
	if err != nil {
		return err
	}
	return c.watch(ctx, prefix, func(ev RawEvent) {
		out := model.Event{Type: ev.Type, Value: ev.Value, Revision: FormatRevision(ev.Revision)}
		if ev.Type != model.EventSynced {
			k, ok := selects(opts, ev.Key)
			if !ok {
				return
			}
			out.Key = k
		}
		h(out)
	})
}

// WatchPrefix follows every raw key under prefix as Watch does (etcd-only
// data; see Of).
func (c *Backend) WatchPrefix(ctx context.Context, prefix string, h func(RawEvent)) error {
	return c.watch(ctx, prefix, h)
}

// watch lists prefix, then follows every change until ctx ends, calling h
// for each event on its own goroutine (h must not block for long).
//
// It first delivers the current state as puts followed by one EventSynced.
// When the watch breaks (leader lost, connection broken, server restarted)
// it resumes from the last revision it delivered, so nothing is re-listed.
// Only when that revision is gone (history compacted past it) does it list
// again and deliver the difference from what it had delivered: puts for new
// or changed keys and deletes for keys that vanished, followed by
// EventSynced. So the view built from the events always converges to a
// fresh list: nothing missed, no ghost keys.
func (c *Backend) watch(ctx context.Context, prefix string, h func(RawEvent)) error {
	known := map[string]int64{}
	backoff := 100 * time.Millisecond
	rev := int64(0) // 0: (re-)list first
	for {
		var err error
		if rev == 0 {
			rev, err = c.resync(ctx, prefix, known, h)
		}
		if err == nil {
			backoff = 100 * time.Millisecond
			rev, err = c.follow(ctx, prefix, rev, known, h)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if errors.Is(err, model.ErrRevisionGone) {
			rev = 0
		}
		slog.Debug("watch interrupted", "prefix", prefix, "resumeAfter", rev, "err", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

// resync lists prefix and delivers the difference from known.
func (c *Backend) resync(ctx context.Context, prefix string, known map[string]int64, h func(RawEvent)) (int64, error) {
	kvs, rev, err := c.ListPrefix(ctx, prefix)
	if err != nil {
		return 0, err
	}
	seen := make(map[string]struct{}, len(kvs))
	for _, kv := range kvs {
		seen[kv.Key] = struct{}{}
		if known[kv.Key] != kv.Revision {
			known[kv.Key] = kv.Revision
			h(RawEvent{Type: model.EventPut, Key: kv.Key, Value: kv.Value, Revision: kv.Revision})
		}
	}
	for k := range known {
		if _, ok := seen[k]; !ok {
			delete(known, k)
			h(RawEvent{Type: model.EventDelete, Key: k, Revision: rev})
		}
	}
	h(RawEvent{Type: model.EventSynced, Revision: rev})
	return rev, nil
}

// follow delivers watch events after rev until the watch fails, and
// returns the last revision delivered (what to resume after); the error is
// a *model.RevisionGoneError when rev+1 was compacted away.
func (c *Backend) follow(ctx context.Context, prefix string, rev int64, known map[string]int64, h func(RawEvent)) (int64, error) {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	wch := c.etcd.Watch(wctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(rev+1), clientv3.WithProgressNotify())
	for resp := range wch {
		if resp.CompactRevision != 0 || errors.Is(resp.Err(), rpctypes.ErrCompacted) {
			return rev, &model.RevisionGoneError{Revision: FormatRevision(rev)}
		}
		if err := resp.Err(); err != nil {
			return rev, err
		}
		if resp.IsProgressNotify() {
			// Everything up to the header's revision has been sent: a
			// quiet watch resumes from there, not from a revision that
			// compaction may since have removed.
			rev = max(rev, resp.Header.Revision)
			continue
		}
		for _, ev := range resp.Events {
			rev = max(rev, ev.Kv.ModRevision)
			deliver(ev, known, h)
		}
	}
	return rev, ctx.Err()
}

func deliver(ev *clientv3.Event, known map[string]int64, h func(RawEvent)) {
	key := string(ev.Kv.Key)
	switch ev.Type {
	case clientv3.EventTypePut:
		known[key] = ev.Kv.ModRevision
		h(RawEvent{Type: model.EventPut, Key: key, Value: ev.Kv.Value, Revision: ev.Kv.ModRevision})
	case clientv3.EventTypeDelete:
		if _, ok := known[key]; ok {
			delete(known, key)
			h(RawEvent{Type: model.EventDelete, Key: key, Revision: ev.Kv.ModRevision})
		}
	}
}
