// Package syncer owns the agent's stream from the datastore: it lists and
// watches every kind the agent follows, one watch per kind, and turns every
// change into a typed calc.Update, then says when the first full lists are
// in.
package syncer

import (
	"context"
	"log/slog"
	"sync"

	"github.com/calico-aio/calico-aio/felix/calc"
	"github.com/calico-aio/calico-aio/ipam"
	"github.com/calico-aio/calico-aio/k8s"
	"github.com/calico-aio/calico-aio/store"
	"github.com/calico-aio/calico-aio/store/api"
	"github.com/calico-aio/calico-aio/store/etcdv3"
)

// syncer lists and watches the datastore and turns every change into a
// typed calc.Update. It reports "in sync" once every watch has delivered
// its first full list.
type syncer struct {
	c    *store.Client
	kube *k8s.Client // nil unless the datastore is Kubernetes
	out  chan<- calc.Update
}

// Run sends c's updates to out until ctx ends. kube is the Kubernetes
// client of a Kubernetes datastore (nil on etcd): the agent also reads
// Kubernetes NetworkPolicies and EndpointSlices through it (kube.go).
func Run(ctx context.Context, c *store.Client, kube *k8s.Client, out chan<- calc.Update) {
	(&syncer{c: c, kube: kube, out: out}).run(ctx)
}

// watch is one stream the syncer follows.
type watch struct {
	name string
	run  func(ctx context.Context, synced func(), send func(calc.Update)) error
}

// watches are one per resource kind and the IPAM blocks, and, on etcd,
// the Service endpoint copies the controller publishes there (etcd only;
// etcdv3.ServicePrefix); on the Kubernetes datastore, Kubernetes
// NetworkPolicies and EndpointSlices instead (kube.go).
func (s *syncer) watches() []watch {
	var out []watch
	for _, k := range api.Kinds() {
		out = append(out, s.modelWatch(store.ListOptions{Kind: k.Kind}))
	}
	out = append(out, s.modelWatch(store.ListOptions{Kind: store.KindIPAMBlock}))
	if s.kube != nil {
		out = append(out, kubeWatches(s.kube)...)
	}
	if raw, ok := etcdv3.Of(s.c.Backend); ok {
		out = append(out, watch{name: etcdv3.ServicePrefix, run: func(ctx context.Context, synced func(), send func(calc.Update)) error {
			return raw.WatchPrefix(ctx, etcdv3.ServicePrefix, func(ev etcdv3.RawEvent) {
				if ev.Type == store.EventSynced {
					synced()
				} else if u, ok := decodeService(ev); ok {
					send(u)
				}
			})
		}})
	}
	return out
}

func (s *syncer) modelWatch(opts store.ListOptions) watch {
	return watch{name: opts.Kind, run: func(ctx context.Context, synced func(), send func(calc.Update)) error {
		return s.c.Watch(ctx, opts, func(ev store.Event) {
			if ev.Type == store.EventSynced {
				synced()
			} else if u, ok := decodeEvent(ev); ok {
				send(s.withoutUnaddressed(u))
			}
		})
	}}
}

// withoutUnaddressed: on the Kubernetes datastore, where a pod's endpoint
// lasts as long as the pod, an endpoint with no addresses (before its ADD,
// after its DEL, or of a finished pod) is no endpoint to the agent, as
// Calico's syncer leaves such pods out: it is sent as deleted.
func (s *syncer) withoutUnaddressed(u calc.Update) calc.Update {
	if w, ok := u.Resource.(*api.WorkloadEndpoint); ok && s.kube != nil && len(w.Spec.IPNetworks) == 0 {
		u.Deleted, u.Resource = true, nil
	}
	return u
}

func (s *syncer) run(ctx context.Context) {
	ws := s.watches()
	var wg sync.WaitGroup
	var mu sync.Mutex
	synced := map[string]bool{}
	send := func(u calc.Update) { s.send(ctx, u) }
	for _, w := range ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := w.run(ctx, func() {
				mu.Lock()
				first := !synced[w.name]
				synced[w.name] = true
				all := len(synced) == len(ws)
				mu.Unlock()
				if first && all {
					s.send(ctx, calc.Update{InSync: true})
				}
			}, send)
			if err != nil && ctx.Err() == nil {
				slog.Error("watch ended", "watch", w.name, "err", err)
			}
		}()
	}
	wg.Wait()
}

func (s *syncer) send(ctx context.Context, u calc.Update) {
	select {
	case s.out <- u:
	case <-ctx.Done():
	}
}

// decodeEvent turns a datastore event into an update; unknown kinds and
// undecodable values are skipped (and logged).
func decodeEvent(ev store.Event) (calc.Update, bool) {
	key, ok := calc.UpdateKey(ev.Key)
	if !ok {
		return calc.Update{}, false
	}
	u := calc.Update{Key: key, Deleted: ev.Type == store.EventDelete}
	if ev.Key.Kind == store.KindIPAMBlock {
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
	}
	k, ok := api.LookupKind(ev.Key.Kind)
	if !ok {
		return u, false
	}
	u.Kind = k.Plural
	if !u.Deleted {
		r, err := store.DecodeObject(store.Object{Key: ev.Key, Value: ev.Value, Revision: ev.Revision})
		if err != nil {
			slog.Warn("skipping undecodable resource", "key", ev.Key, "err", err)
			return u, false
		}
		u.Resource = r
	}
	return u, true
}

// decodeService turns an event of the Service endpoint copies into an
// update.
func decodeService(ev etcdv3.RawEvent) (calc.Update, bool) {
	u := calc.Update{Kind: calc.KindService, Key: ev.Key, Deleted: ev.Type == store.EventDelete}
	if u.Deleted {
		return u, true
	}
	se, err := store.ParseServiceEndpoints(ev.Key, ev.Value)
	if err != nil {
		slog.Warn("skipping undecodable service endpoints", "key", ev.Key, "err", err)
		return u, false
	}
	u.Service = se
	return u, true
}
