// Package controller keeps the Calico datastore's copies of Kubernetes
// objects up to date, as Calico's kube-controllers do: namespace and service
// account profiles ("kns.<ns>", "ksa.<ns>.<sa>") and Kubernetes
// NetworkPolicies ("knp.default.<name>"). It polls the API server every
// Resync interval; RunElected runs it under an etcd leader election so that
// only one instance writes at a time.
package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"reflect"
	"strings"
	"time"

	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/calico-aio/calico-aio/k8s"
	"github.com/calico-aio/calico-aio/store"
	"github.com/calico-aio/calico-aio/store/api"
)

// DefaultResync is how often Run reconciles when Resync is zero.
const DefaultResync = 5 * time.Second

// LeaderPrefix is the etcd election prefix RunElected campaigns on.
const LeaderPrefix = "/calico/kube-controllers/leader"

// LeaseTTL is the leader session's TTL in seconds: a leader that dies
// without resigning is replaced after at most this long.
const LeaseTTL = 5

var (
	profileKind, _       = api.LookupKind("Profile")
	networkPolicyKind, _ = api.LookupKind("NetworkPolicy")
)

// Controller reconciles the datastore with the Kubernetes API.
type Controller struct {
	// Resync is the interval between reconciliations (DefaultResync when 0).
	Resync time.Duration
	// Logf reports errors and changes (log.Printf when nil).
	Logf func(format string, args ...any)

	store *store.Client
	kube  lister
}

// lister is what the controller reads from Kubernetes (k8s.Client).
type lister interface {
	ListNamespaces(ctx context.Context) ([]k8s.Namespace, error)
	ListServiceAccounts(ctx context.Context) ([]k8s.ServiceAccount, error)
	ListNetworkPolicies(ctx context.Context) ([]k8s.NetworkPolicy, error)
}

// New returns a controller writing to st and reading the API server named
// by kubeconfig ("" for the default loading rules). It contacts neither.
func New(st *store.Client, kubeconfig string) (*Controller, error) {
	kc, err := k8s.NewClient(kubeconfig)
	if err != nil {
		return nil, err
	}
	return &Controller{store: st, kube: kc}, nil
}

func (c *Controller) logf(format string, args ...any) {
	if c.Logf != nil {
		c.Logf(format, args...)
		return
	}
	log.Printf(format, args...)
}

// Run reconciles at once and then every Resync interval until ctx is done;
// a failed reconciliation is logged and retried at the next one. It returns
// nil when ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	every := c.Resync
	if every <= 0 {
		every = DefaultResync
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if err := c.Sync(ctx); err != nil && ctx.Err() == nil {
			c.logf("kube-controllers: sync: %v", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// key names a datastore object: kind, namespace and name.
type key struct{ kind, ns, name string }

// Sync makes one reconciliation: it lists the Kubernetes objects, creates or
// updates their Calico counterparts that differ, and deletes the counterparts
// (only "kns.", "ksa." profiles and "knp.default." policies) whose
// Kubernetes object is gone. Nothing is deleted unless every list succeeded.
func (c *Controller) Sync(ctx context.Context) error {
	nss, err := c.kube.ListNamespaces(ctx)
	if err != nil {
		return err
	}
	sas, err := c.kube.ListServiceAccounts(ctx)
	if err != nil {
		return err
	}
	nps, err := c.kube.ListNetworkPolicies(ctx)
	if err != nil {
		return err
	}

	want := map[key]api.Resource{}
	keep := map[key]bool{} // policies that cannot be converted: left as they are
	var errs []error
	for _, ns := range nss {
		p := k8s.NamespaceToProfile(ns)
		want[key{profileKind.Kind, "", p.Metadata.Name}] = p
	}
	for _, sa := range sas {
		p := k8s.ServiceAccountToProfile(sa)
		want[key{profileKind.Kind, "", p.Metadata.Name}] = p
	}
	for _, np := range nps {
		p, err := k8s.NetworkPolicyToCalico(np)
		if err != nil {
			errs = append(errs, err)
		}
		if p == nil {
			keep[key{networkPolicyKind.Kind, np.Metadata.Namespace, k8s.NetworkPolicyPrefix + np.Metadata.Name}] = true
			continue
		}
		want[key{networkPolicyKind.Kind, p.Metadata.Namespace, p.Metadata.Name}] = p
	}

	have := map[key]api.Resource{}
	for _, kind := range []api.KindInfo{profileKind, networkPolicyKind} {
		rs, _, err := c.store.ListResources(ctx, kind, "")
		if err != nil {
			return fmt.Errorf("listing %s: %w", kind.Plural, err)
		}
		for _, r := range rs {
			m := r.GetObjectMeta()
			if owned(kind, m.Name) {
				have[key{kind.Kind, m.Namespace, m.Name}] = r
			}
		}
	}

	for k, r := range want {
		if cur, ok := have[k]; ok && same(cur, r) {
			continue
		}
		if _, err := c.store.ApplyResource(ctx, r); err != nil {
			errs = append(errs, fmt.Errorf("writing %s %s: %w", k.kind, name(k), err))
			continue
		}
		c.logf("kube-controllers: wrote %s %s", k.kind, name(k))
	}
	for k, r := range have {
		if _, ok := want[k]; ok || keep[k] {
			continue
		}
		kind := profileKind
		if k.kind == networkPolicyKind.Kind {
			kind = networkPolicyKind
		}
		rev := r.GetObjectMeta().ResourceVersion
		var n int64
		_, _ = fmt.Sscan(rev, &n)
		if _, err := c.store.DeleteResource(ctx, kind, k.ns, k.name, n); err != nil && !errors.Is(err, store.ErrNotFound) {
			errs = append(errs, fmt.Errorf("deleting %s %s: %w", k.kind, name(k), err))
			continue
		}
		c.logf("kube-controllers: deleted %s %s", k.kind, name(k))
	}
	return errors.Join(errs...)
}

func name(k key) string {
	if k.ns == "" {
		return k.name
	}
	return k.ns + "/" + k.name
}

// owned says whether the controller manages the object: it never touches
// others.
func owned(kind api.KindInfo, name string) bool {
	switch kind.Kind {
	case profileKind.Kind:
		return strings.HasPrefix(name, k8s.NamespaceProfilePrefix) || strings.HasPrefix(name, k8s.ServiceAccountProfilePrefix)
	case networkPolicyKind.Kind:
		return strings.HasPrefix(name, k8s.NetworkPolicyPrefix)
	}
	return false
}

// same says whether stored object cur already says what desired does: equal
// after defaulting, ignoring the metadata the store fills in.
func same(cur, desired api.Resource) bool {
	a, err1 := normalized(cur)
	b, err2 := normalized(desired)
	return err1 == nil && err2 == nil && reflect.DeepEqual(a, b)
}

func normalized(r api.Resource) (map[string]any, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	// Default the copy, not r.
	c := reflect.New(reflect.TypeOf(r).Elem()).Interface().(api.Resource)
	if err := json.Unmarshal(b, c); err != nil {
		return nil, err
	}
	c.Default()
	if b, err = json.Marshal(c); err != nil {
		return nil, err
	}
	m = nil
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	om := r.GetObjectMeta()
	m["metadata"] = map[string]any{"name": om.Name, "namespace": om.Namespace, "labels": nonEmpty(om.Labels), "annotations": nonEmpty(om.Annotations)}
	return m, nil
}

// RunElected runs c while this instance (named id) is the leader elected
// under LeaderPrefix in the etcd behind client, with a session of LeaseTTL
// seconds. It campaigns again when it loses the session, and returns nil
// when ctx ends, resigning (revoking its lease) so another instance takes
// over at once.
func RunElected(ctx context.Context, client *store.Client, id string, c *Controller) error {
	cli := client.Etcd()
	for ctx.Err() == nil {
		sess, err := concurrency.NewSession(cli, concurrency.WithTTL(LeaseTTL), concurrency.WithContext(ctx))
		if err != nil {
			if ctx.Err() == nil {
				c.logf("kube-controllers %s: election session: %v", id, err)
				sleep(ctx, time.Second)
			}
			continue
		}
		release := func() {
			// ctx may be done: revoke with a fresh one so the key goes now.
			rctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_, _ = cli.Revoke(rctx, sess.Lease())
			cancel()
			_ = sess.Close()
		}
		el := concurrency.NewElection(sess, LeaderPrefix)
		if err := el.Campaign(ctx, id); err != nil {
			release()
			if ctx.Err() == nil {
				c.logf("kube-controllers %s: campaign: %v", id, err)
				sleep(ctx, time.Second)
			}
			continue
		}
		c.logf("kube-controllers %s: elected leader", id)
		runCtx, cancel := context.WithCancel(ctx)
		go func() {
			select {
			case <-sess.Done():
				c.logf("kube-controllers %s: lost leader session", id)
			case <-runCtx.Done():
			}
			cancel()
		}()
		err = c.Run(runCtx)
		cancel()
		release()
		if err != nil && ctx.Err() == nil {
			c.logf("kube-controllers %s: %v", id, err)
		}
	}
	return nil
}

func nonEmpty(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	return m
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
