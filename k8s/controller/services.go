package controller

import (
	"bytes"
	"context"
	"errors"
	"fmt"
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

// serviceEndpoints is k8s.ServiceEndpoints keyed by
// etcdv3.ServiceEndpointsKey.
func serviceEndpoints(in []k8s.EndpointSlice) map[string]*store.ServiceEndpoints {
	out := map[string]*store.ServiceEndpoints{}
	for _, se := range k8s.ServiceEndpoints(in) {
		out[etcdv3.ServiceEndpointsKey(se.Namespace, se.Name)] = se
	}
	return out
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
