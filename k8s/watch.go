package k8s

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

// ErrExpired: the resource version a watch was to resume from is too old
// (HTTP 410 Gone); watch again from "" and assume anything changed.
var ErrExpired = errors.New("watch resource version expired")

// The kinds WatchChanges accepts.
const (
	WatchNamespaces      = "namespaces"
	WatchServiceAccounts = "serviceaccounts"
	WatchNetworkPolicies = "networkpolicies"
	WatchPods            = "pods"
	WatchNodes           = "nodes"
	WatchEndpointSlices  = "endpointslices"
)

var watchable = map[string]schema.GroupVersionResource{
	WatchNamespaces:      namespacesResource,
	WatchServiceAccounts: serviceAccountsResource,
	WatchNetworkPolicies: networkPoliciesResource,
	WatchPods:            podsResource,
	WatchNodes:           nodesResource,
	WatchEndpointSlices:  endpointSlicesResource,
}

// watchTimeout is how long the server keeps one watch open (randomised
// so that the watches of one client do not all restart together).
func watchTimeout() *int64 {
	s := int64(240 + rand.IntN(120))
	return &s
}

// WatchChanges watches every object of kind what (one of the Watch*
// constants, all namespaces) from resource version rv and calls changed
// after each added, modified or deleted object. With rv "" the watch
// starts from the current state, reporting each existing object as added.
// It returns, when the watch ends (the server closes it after a few
// minutes), fails or ctx ends, the resource version to resume from;
// the error wraps ErrExpired when rv is too old to resume from.
func (c *Client) WatchChanges(ctx context.Context, what, rv string, changed func()) (string, error) {
	res, ok := watchable[what]
	if !ok {
		return rv, fmt.Errorf("watching %s: not a kind the client watches", what)
	}
	dyn, err := c.watchClient()
	if err != nil {
		return rv, err
	}
	opts := metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true, TimeoutSeconds: watchTimeout()}
	w, err := dyn.Resource(res).Watch(ctx, opts)
	if err != nil {
		return c.watchError(what, rv, err)
	}
	defer w.Stop()
	for {
		var ev watch.Event
		select {
		case <-ctx.Done():
			return rv, ctx.Err()
		case ev, ok = <-w.ResultChan():
			if !ok {
				return rv, nil
			}
		}
		if ev.Type == watch.Error {
			return c.watchError(what, rv, apierrors.FromObject(ev.Object))
		}
		if m, err := metaOf(ev.Object); err == nil && m.GetResourceVersion() != "" {
			rv = m.GetResourceVersion()
		}
		if ev.Type != watch.Bookmark {
			changed()
		}
	}
}

func metaOf(obj any) (metav1.Object, error) {
	m, ok := obj.(metav1.Object)
	if !ok {
		return nil, fmt.Errorf("watch event object %T has no metadata", obj)
	}
	return m, nil
}

// watchError classifies a failed watch of what from rv.
func (c *Client) watchError(what, rv string, err error) (string, error) {
	if apierrors.IsGone(err) || apierrors.IsResourceExpired(err) {
		return "", fmt.Errorf("watching %s from %s: %w", what, rv, ErrExpired)
	}
	return rv, c.classify("watching "+what, err)
}

// watchClient is a dynamic client without the request timeout, which
// would cut every watch off after RequestTimeout. It is made on first use
// so that clients that only read (the CNI plugin) never pay for it.
func (c *Client) watchClient() (dynamic.Interface, error) {
	c.watchOnce.Do(func() {
		cfg := rest.CopyConfig(c.cfg)
		cfg.Timeout = 0
		c.watchDyn, c.watchErr = dynamic.NewForConfig(cfg)
		if c.watchErr != nil {
			c.watchErr = fmt.Errorf("kubernetes watch client for %s: %w", cfg.Host, c.watchErr)
		}
	})
	return c.watchDyn, c.watchErr
}
