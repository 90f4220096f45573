package syncer

import (
	"context"
	"encoding/json"
	"log/slog"
	"maps"
	"slices"

	"github.com/calico-aio/calico-aio/felix/calc"
	"github.com/calico-aio/calico-aio/k8s"
	"github.com/calico-aio/calico-aio/store/api"
	"github.com/calico-aio/calico-aio/store/etcdv3"
)

// On the Kubernetes datastore the agent reads, as Calico's does, what has
// no copy among Calico's resources straight from the API: Kubernetes
// NetworkPolicies, converted into the Calico NetworkPolicies
// "knp.default.<name>" (k8s.NetworkPolicyToCalico), and Services'
// EndpointSlices, grouped into the Services' endpoints
// (k8s.ServiceEndpoints) under the keys the etcd-mode controller
// publishes them at. Each is one k8s.Client.Follow: listed once, then
// watched, resumed from the last resourceVersion.

var networkPolicyKind, _ = api.LookupKind("NetworkPolicy")

// kubeWatches are the watches of Kubernetes objects read directly.
func kubeWatches(kc *k8s.Client) []watch {
	return []watch{
		followWatch(kc, k8s.WatchNetworkPolicies, func() func(k8s.FollowEvent) []calc.Update { return decodeKubePolicy }),
		followWatch(kc, k8s.WatchEndpointSlices, func() func(k8s.FollowEvent) []calc.Update { return newSliceIndex().apply }),
	}
}

// followWatch is the watch of kind what, whose events decode (a fresh one
// per watch: it may keep state) turns into updates.
func followWatch(kc *k8s.Client, what string, decoder func() func(k8s.FollowEvent) []calc.Update) watch {
	return watch{name: "kubernetes " + what, run: func(ctx context.Context, synced func(), send func(calc.Update)) error {
		decode := decoder()
		return kc.Follow(ctx, what, func(ev k8s.FollowEvent) {
			if ev.Type == k8s.FollowSynced {
				synced()
				return
			}
			for _, u := range decode(ev) {
				send(u)
			}
		})
	}}
}

// decodeKubePolicy turns a NetworkPolicy event into the update of its
// Calico policy. One that cannot be converted at all is logged and
// withdrawn (it is enforced by no rule rather than by an older version);
// one with rules left out is enforced without them (they only allow).
func decodeKubePolicy(ev k8s.FollowEvent) []calc.Update {
	u := calc.Update{Kind: networkPolicyKind.Plural, Deleted: true,
		Key: calc.ResourceUpdateKey(networkPolicyKind, ev.Namespace, k8s.NetworkPolicyPrefix+ev.Name)}
	if ev.Type == k8s.FollowDelete {
		return []calc.Update{u}
	}
	var np k8s.NetworkPolicy
	if err := json.Unmarshal(ev.Object, &np); err != nil {
		slog.Warn("undecodable Kubernetes NetworkPolicy: not enforced", "namespace", ev.Namespace, "name", ev.Name, "err", err)
		return []calc.Update{u}
	}
	p, err := k8s.NetworkPolicyToCalico(np)
	if err != nil {
		slog.Warn("Kubernetes NetworkPolicy only partly converted", "err", err)
	}
	if p != nil {
		u.Deleted, u.Resource = false, p
	}
	return []calc.Update{u}
}

// sliceIndex is the EndpointSlices seen, by Service, to regroup a
// Service's slices when one of them changes.
type sliceIndex struct {
	service  map[[2]string]string                       // a slice's Service, by slice namespace and name
	services map[[2]string]map[string]k8s.EndpointSlice // slices by Service namespace and name, then slice name
}

func newSliceIndex() *sliceIndex {
	return &sliceIndex{service: map[[2]string]string{}, services: map[[2]string]map[string]k8s.EndpointSlice{}}
}

// apply records a slice event and returns the updates of the Services it
// touched (its old and new Service): their endpoints, or their deletion
// when no slice of theirs is left. Slices of no Service are left out.
func (x *sliceIndex) apply(ev k8s.FollowEvent) []calc.Update {
	k := [2]string{ev.Namespace, ev.Name}
	var touched []string
	if svc, ok := x.service[k]; ok {
		touched = append(touched, svc)
		delete(x.service, k)
		delete(x.services[[2]string{ev.Namespace, svc}], ev.Name)
	}
	if ev.Type == k8s.FollowPut {
		var es k8s.EndpointSlice
		if err := json.Unmarshal(ev.Object, &es); err != nil {
			slog.Warn("undecodable EndpointSlice: left out", "namespace", ev.Namespace, "name", ev.Name, "err", err)
		} else if svc := es.Metadata.Labels[k8s.LabelServiceName]; svc != "" {
			x.service[k] = svc
			sk := [2]string{ev.Namespace, svc}
			if x.services[sk] == nil {
				x.services[sk] = map[string]k8s.EndpointSlice{}
			}
			x.services[sk][ev.Name] = es
			if !slices.Contains(touched, svc) {
				touched = append(touched, svc)
			}
		}
	}
	out := make([]calc.Update, 0, len(touched))
	for _, svc := range touched {
		sk := [2]string{ev.Namespace, svc}
		u := calc.Update{Kind: calc.KindService, Key: etcdv3.ServiceEndpointsKey(ev.Namespace, svc), Deleted: true}
		if se := k8s.ServiceEndpoints(slices.Collect(maps.Values(x.services[sk])))[ev.Namespace+"/"+svc]; se != nil {
			u.Deleted, u.Service = false, se
		} else {
			delete(x.services, sk)
		}
		out = append(out, u)
	}
	return out
}
