package store

import (
	"context"
	"log/slog"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// EventType says what a watch event means.
type EventType uint8

// Watch event types.
const (
	EventPut    EventType = iota + 1 // key created or changed
	EventDelete                      // key removed
	EventSynced                      // every key under the prefix has been delivered
)

func (t EventType) String() string {
	switch t {
	case EventPut:
		return "put"
	case EventDelete:
		return "delete"
	case EventSynced:
		return "synced"
	}
	return "unknown"
}

// Event is one change under a watched prefix.
type Event struct {
	Type     EventType
	Key      string
	Value    []byte // nil for deletes and sync markers
	Revision int64
}

// Watch lists prefix, then follows every change until ctx ends, calling h for
// each event on its own goroutine (h must not block for long).
//
// It first delivers the current state as puts followed by one EventSynced.
// When the watch fails for any reason (history compacted, leader lost,
// connection broken, server restarted) it lists again and delivers only the
// difference from what it had already delivered: puts for new or changed keys
// and deletes for keys that vanished, followed by EventSynced. So the view
// built from the events always converges to a fresh list: nothing missed, no
// ghost keys.
func (c *Client) Watch(ctx context.Context, prefix string, h func(Event)) error {
	known := map[string]int64{}
	backoff := 100 * time.Millisecond
	for {
		rev, err := c.resync(ctx, prefix, known, h)
		if err == nil {
			backoff = 100 * time.Millisecond
			err = c.follow(ctx, prefix, rev, known, h)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		slog.Debug("watch interrupted, re-listing", "prefix", prefix, "err", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

// resync lists prefix and delivers the difference from known.
func (c *Client) resync(ctx context.Context, prefix string, known map[string]int64, h func(Event)) (int64, error) {
	kvs, rev, err := c.List(ctx, prefix)
	if err != nil {
		return 0, err
	}
	seen := make(map[string]struct{}, len(kvs))
	for _, kv := range kvs {
		seen[kv.Key] = struct{}{}
		if known[kv.Key] != kv.Revision {
			known[kv.Key] = kv.Revision
			h(Event{Type: EventPut, Key: kv.Key, Value: kv.Value, Revision: kv.Revision})
		}
	}
	for k := range known {
		if _, ok := seen[k]; !ok {
			delete(known, k)
			h(Event{Type: EventDelete, Key: k, Revision: rev})
		}
	}
	h(Event{Type: EventSynced, Revision: rev})
	return rev, nil
}

// follow delivers watch events from rev+1 until the watch fails.
func (c *Client) follow(ctx context.Context, prefix string, rev int64, known map[string]int64, h func(Event)) error {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	wch := c.etcd.Watch(wctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(rev+1))
	for resp := range wch {
		if err := resp.Err(); err != nil {
			return err
		}
		for _, ev := range resp.Events {
			key := string(ev.Kv.Key)
			switch ev.Type {
			case clientv3.EventTypePut:
				known[key] = ev.Kv.ModRevision
				h(Event{Type: EventPut, Key: key, Value: ev.Kv.Value, Revision: ev.Kv.ModRevision})
			case clientv3.EventTypeDelete:
				if _, ok := known[key]; ok {
					delete(known, key)
					h(Event{Type: EventDelete, Key: key, Revision: ev.Kv.ModRevision})
				}
			}
		}
	}
	return ctx.Err()
}
