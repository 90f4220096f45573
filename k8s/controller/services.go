package controller

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/calico-aio/calico-aio/k8s"
	"github.com/calico-aio/calico-aio/store"
	"github.com/calico-aio/calico-aio/store/etcdv3"
)

// Service endpoints for rule services matches: the controller publishes,
// for each Service that has EndpointSlices (those labelled
// kubernetes.io/service-name), their addresses and ports under
// etcdv3.ServiceEndpointsKey; the agents turn them into IP sets. As in
// Calico, membership comes from the EndpointSlices alone, whatever the
// endpoints' conditions, and a port without a number adds nothing.

// serviceEndpoints groups slices by their Service, keyed by
// etcdv3.ServiceEndpointsKey, in a deterministic form: slices by name,
// addresses canonical and sorted, ports sorted. FQDN slices and addresses
// that are not IP addresses are left out.
func serviceEndpoints(in []k8s.EndpointSlice) map[string]*store.ServiceEndpoints {
	out := map[string]*store.ServiceEndpoints{}
	for _, es := range in {
		svc := es.Metadata.Labels[k8s.LabelServiceName]
		if svc == "" || es.AddressType == "FQDN" {
			continue
		}
		key := etcdv3.ServiceEndpointsKey(es.Metadata.Namespace, svc)
		se := out[key]
		if se == nil {
			se = &store.ServiceEndpoints{Namespace: es.Metadata.Namespace, Name: svc, Slices: []store.ServiceSlice{}}
			out[key] = se
		}
		sl := store.ServiceSlice{Name: es.Metadata.Name, Addresses: []string{}}
		for _, ep := range es.Endpoints {
			for _, a := range ep.Addresses {
				if ip, err := netip.ParseAddr(strings.TrimSpace(a)); err == nil && !ip.Is4In6() {
					sl.Addresses = append(sl.Addresses, ip.String())
				}
			}
		}
		slices.Sort(sl.Addresses)
		sl.Addresses = slices.Compact(sl.Addresses)
		for _, p := range es.Ports {
			if sp, ok := servicePort(p); ok {
				sl.Ports = append(sl.Ports, sp)
			}
		}
		slices.SortFunc(sl.Ports, func(a, b store.ServicePort) int {
			return cmp.Or(cmp.Compare(a.Protocol, b.Protocol), cmp.Compare(a.Port, b.Port), cmp.Compare(a.Name, b.Name))
		})
		sl.Ports = slices.Compact(sl.Ports)
		se.Slices = append(se.Slices, sl)
	}
	for _, se := range out {
		slices.SortFunc(se.Slices, func(a, b store.ServiceSlice) int { return cmp.Compare(a.Name, b.Name) })
	}
	return out
}

// servicePort is a slice port with a number (protocol TCP when unset); ok
// is false for one without a number or with another protocol.
func servicePort(p k8s.EndpointPort) (store.ServicePort, bool) {
	if p.Port == nil || *p.Port < 1 || *p.Port > 65535 {
		return store.ServicePort{}, false
	}
	proto := "TCP"
	if p.Protocol != nil {
		proto = strings.ToUpper(*p.Protocol)
	}
	switch proto {
	case "TCP", "UDP", "SCTP":
	default:
		return store.ServicePort{}, false
	}
	sp := store.ServicePort{Protocol: proto, Port: uint16(*p.Port)}
	if p.Name != nil {
		sp.Name = *p.Name
	}
	return sp, true
}

// syncServices makes the published service endpoints those of the
// EndpointSlices in the API: writes what changed, deletes what has no
// slice left. A failed list changes nothing.
func (c *Controller) syncServices(ctx context.Context) error {
	list, err := c.kube.ListEndpointSlices(ctx)
	if err != nil {
		return err
	}
	raw, ok := etcdv3.Of(c.store.Backend)
	if !ok {
		return nil // etcd-only copies: other datastores serve Services themselves
	}
	want := serviceEndpoints(list)
	have, _, err := raw.ListPrefix(ctx, etcdv3.ServicePrefix)
	if err != nil {
		return fmt.Errorf("listing published service endpoints: %w", err)
	}
	var errs []error
	for _, kv := range have {
		se, ok := want[kv.Key]
		if !ok {
			if err := raw.DeleteKey(ctx, kv.Key, kv.Revision); err != nil && !errors.Is(err, store.ErrNotFound) {
				errs = append(errs, fmt.Errorf("deleting %s: %w", kv.Key, err))
				continue
			}
			c.logf("kube-controllers: deleted the endpoints of service %s (no endpoint slice left)", strings.TrimPrefix(kv.Key, etcdv3.ServicePrefix))
			continue
		}
		delete(want, kv.Key)
		val, err := se.Encode()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if bytes.Equal(val, kv.Value) {
			continue
		}
		if _, err := raw.UpdateKey(ctx, kv.Key, val, kv.Revision); err != nil {
			errs = append(errs, fmt.Errorf("updating %s: %w", kv.Key, err))
			continue
		}
		c.logf("kube-controllers: updated the endpoints of service %s/%s", se.Namespace, se.Name)
	}
	for key, se := range want {
		val, err := se.Encode()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if _, err := raw.CreateKey(ctx, key, val); err != nil {
			errs = append(errs, fmt.Errorf("creating %s: %w", key, err))
			continue
		}
		c.logf("kube-controllers: published the endpoints of service %s/%s", se.Namespace, se.Name)
	}
	return errors.Join(errs...)
}
