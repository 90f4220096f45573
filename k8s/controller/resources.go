package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/calico-aio/calico-aio/k8s"
	"github.com/calico-aio/calico-aio/store"
	"github.com/calico-aio/calico-aio/store/api"
)

var (
	profileKind, _       = api.LookupKind("Profile")
	networkPolicyKind, _ = api.LookupKind("NetworkPolicy")
	wepKind, _           = api.LookupKind("WorkloadEndpoint")
	nodeKind, _          = api.LookupKind("Node")
)

// key names a datastore object: kind, namespace and name.
type key struct{ kind, ns, name string }

func name(k key) string {
	if k.ns == "" {
		return k.name
	}
	return k.ns + "/" + k.name
}

// syncProfiles makes the "kns." and "ksa." profiles equal to the API's
// namespaces and service accounts. Nothing is written unless both lists
// succeeded.
func (c *Controller) syncProfiles(ctx context.Context) error {
	nss, err := c.kube.ListNamespaces(ctx)
	if err != nil {
		return err
	}
	sas, err := c.kube.ListServiceAccounts(ctx)
	if err != nil {
		return err
	}
	want := map[key]api.Resource{}
	for _, ns := range nss {
		p := k8s.NamespaceToProfile(ns)
		want[key{profileKind.Kind, "", p.Metadata.Name}] = p
	}
	for _, sa := range sas {
		p := k8s.ServiceAccountToProfile(sa)
		want[key{profileKind.Kind, "", p.Metadata.Name}] = p
	}
	return c.reconcile(ctx, profileKind, want, nil)
}

// syncPolicies makes the "knp.default." policies equal to the API's
// NetworkPolicies. A policy that cannot be converted keeps its old copy.
func (c *Controller) syncPolicies(ctx context.Context) error {
	nps, err := c.kube.ListNetworkPolicies(ctx)
	if err != nil {
		return err
	}
	want := map[key]api.Resource{}
	keep := map[key]bool{}
	var errs []error
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
	return errors.Join(append(errs, c.reconcile(ctx, networkPolicyKind, want, keep))...)
}

// reconcile creates or updates the objects of kind in want that differ
// from the stored ones, and deletes the stored objects the controller owns
// that are neither wanted nor kept.
func (c *Controller) reconcile(ctx context.Context, kind api.KindInfo, want map[key]api.Resource, keep map[key]bool) error {
	rs, _, err := c.store.ListResources(ctx, kind, "")
	if err != nil {
		return fmt.Errorf("listing %s: %w", kind.Plural, err)
	}
	have := map[key]api.Resource{}
	for _, r := range rs {
		m := r.GetObjectMeta()
		if owned(kind, m.Name) {
			have[key{kind.Kind, m.Namespace, m.Name}] = r
		}
	}
	var errs []error
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
		if _, err := c.store.DeleteObject(ctx, r); err != nil && !errors.Is(err, store.ErrNotFound) {
			errs = append(errs, fmt.Errorf("deleting %s %s: %w", k.kind, name(k), err))
			continue
		}
		c.logf("kube-controllers: deleted %s %s", k.kind, name(k))
	}
	return errors.Join(errs...)
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
	// Default a copy, not r.
	c := reflect.New(reflect.TypeOf(r).Elem()).Interface().(api.Resource)
	if err := json.Unmarshal(b, c); err != nil {
		return nil, err
	}
	c.Default()
	if b, err = json.Marshal(c); err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	om := c.GetObjectMeta() // with the labels defaulting adds (the tier label)
	m["metadata"] = map[string]any{"name": om.Name, "namespace": om.Namespace, "labels": nonEmpty(om.Labels), "annotations": nonEmpty(om.Annotations)}
	return m, nil
}

func nonEmpty(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	return m
}
