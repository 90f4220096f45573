// Package syncer owns the agent's stream from the datastore: it lists and
// watches the prefixes the agent follows and turns every change into a
// typed calc.Update, then says when the first full lists are in.
package syncer

import (
	"context"
	"log/slog"
	"strings"
	"sync"

	"github.com/calico-aio/calico-aio/felix/calc"
	"github.com/calico-aio/calico-aio/ipam"
	"github.com/calico-aio/calico-aio/store"
)

// syncer lists and watches the datastore and turns every change into a
// typed calc.Update. It reports "in sync" once every watched prefix has
// delivered its first full list.
type syncer struct {
	c   *store.Client
	out chan<- calc.Update
}

var watchedPrefixes = []string{store.ResourcePrefix, store.BlockPrefix, store.ServicePrefix}

// Run sends c's updates to out until ctx ends.
func Run(ctx context.Context, c *store.Client, out chan<- calc.Update) {
	(&syncer{c: c, out: out}).run(ctx)
}

func (s *syncer) run(ctx context.Context) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	synced := map[string]bool{}
	for _, p := range watchedPrefixes {
		wg.Add(1)
		go func(prefix string) {
			defer wg.Done()
			err := s.c.Watch(ctx, prefix, func(ev store.Event) {
				if ev.Type == store.EventSynced {
					mu.Lock()
					first := !synced[prefix]
					synced[prefix] = true
					all := len(synced) == len(watchedPrefixes)
					mu.Unlock()
					if first && all {
						s.send(ctx, calc.Update{InSync: true})
					}
					return
				}
				if u, ok := decodeEvent(ev); ok {
					s.send(ctx, u)
				}
			})
			if err != nil && ctx.Err() == nil {
				slog.Error("watch ended", "prefix", prefix, "err", err)
			}
		}(p)
	}
	wg.Wait()
}

func (s *syncer) send(ctx context.Context, u calc.Update) {
	select {
	case s.out <- u:
	case <-ctx.Done():
	}
}

// decodeEvent turns a datastore event into an update; unknown keys and
// undecodable values are skipped (and logged).
func decodeEvent(ev store.Event) (calc.Update, bool) {
	u := calc.Update{Key: ev.Key, Deleted: ev.Type == store.EventDelete}
	switch {
	case strings.HasPrefix(ev.Key, store.BlockPrefix):
		u.Kind = calc.KindBlock
		if !u.Deleted {
			b, err := ipam.ParseBlock(ev.Value)
			if err != nil {
				slog.Warn("skipping undecodable block", "key", ev.Key, "err", err)
				return u, false
			}
			u.Block = b
		}
		return u, true
	case strings.HasPrefix(ev.Key, store.ServicePrefix):
		u.Kind = calc.KindService
		if !u.Deleted {
			se, err := store.ParseServiceEndpoints(ev.Key, ev.Value)
			if err != nil {
				slog.Warn("skipping undecodable service endpoints", "key", ev.Key, "err", err)
				return u, false
			}
			u.Service = se
		}
		return u, true
	case strings.HasPrefix(ev.Key, store.ResourcePrefix):
		rest := strings.TrimPrefix(ev.Key, store.ResourcePrefix)
		plural, _, _ := strings.Cut(rest, "/")
		u.Kind = plural
		if !u.Deleted {
			r, err := store.DecodeKV(store.KV{Key: ev.Key, Value: ev.Value, Revision: ev.Revision})
			if err != nil {
				slog.Warn("skipping undecodable resource", "key", ev.Key, "err", err)
				return u, false
			}
			u.Resource = r
		}
		return u, true
	}
	return u, false
}
