package kube

import (
	"context"
	"fmt"
	"strings"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/calico-aio/calico-aio/k8s"
	"github.com/calico-aio/calico-aio/store/kdd"
	"github.com/calico-aio/calico-aio/store/kdd/derive"
	"github.com/calico-aio/calico-aio/store/model"
)

// getDerived reads a kind Calico derives from Kubernetes objects: a Node
// from the Kubernetes Node, a WorkloadEndpoint from its Pod, a Profile
// from a Namespace (kns.*) or ServiceAccount (ksa.*).
func (b *Backend) getDerived(ctx context.Context, k kdd.Kind, key model.Key) (model.Object, error) {
	if key.Name == "" || key.Node != "" || k.Namespaced != (key.Namespace != "") {
		return model.Object{}, fmt.Errorf("%s: not a %s key (namespaced: %v)", key, k.Kind, k.Namespaced)
	}
	if k.Kind == profileKind {
		return b.getProfile(ctx, key)
	}
	src, err := sourceOf(k, "")
	if err != nil {
		return model.Object{}, err
	}
	name := key.Name
	if k.Kind == "WorkloadEndpoint" {
		_, pod, _, ok := splitEndpointName(key.Name)
		if !ok {
			return model.Object{}, &model.NotFoundError{Key: key}
		}
		name = pod
	}
	return b.getFrom(ctx, src, key, key.Namespace, name)
}

// getFrom reads the Kubernetes object ns/name of src and converts it;
// NotFound unless it converts to key's object.
func (b *Backend) getFrom(ctx context.Context, src source, key model.Key, ns, name string) (model.Object, error) {
	ri := b.dyn.Resource(src.gvr)
	u, err := k8s.GetRecent(ctx, func(o metav1.GetOptions) (*unstructured.Unstructured, error) {
		if ns != "" {
			return ri.Namespace(ns).Get(ctx, name, o)
		}
		return ri.Get(ctx, name, o)
	})
	if err != nil {
		return model.Object{}, b.apiError("get", key, "", err)
	}
	if src.gvr == podsGVR {
		b.sawPod(u)
	}
	o, ok, err := b.read(src, u)
	if err != nil {
		return o, fmt.Errorf("%s: %w", key, err)
	}
	if !ok || o.Key != key {
		return model.Object{}, &model.NotFoundError{Key: key}
	}
	return o, nil
}

// splitEndpointName splits a Kubernetes WorkloadEndpoint name,
// <node>-k8s-<pod>-<interface> with each part's '-' doubled, into its
// parts.
func splitEndpointName(name string) (node, pod, iface string, ok bool) {
	var parts []string
	var cur strings.Builder
	for i := 0; i < len(name); i++ {
		switch {
		case name[i] != '-':
			cur.WriteByte(name[i])
		case i+1 < len(name) && name[i+1] == '-':
			cur.WriteByte('-')
			i++
		default:
			parts = append(parts, cur.String())
			cur.Reset()
		}
	}
	parts = append(parts, cur.String())
	if len(parts) != 4 || parts[1] != "k8s" || parts[0] == "" || parts[2] == "" || parts[3] == "" {
		return "", "", "", false
	}
	return parts[0], parts[2], parts[3], true
}

// profileKind is the kind derived from two resources.
const profileKind = "Profile"

// Profile name prefixes: kns.<namespace>, ksa.<namespace>.<account>.
const (
	namespaceProfilePrefix      = "kns."
	serviceAccountProfilePrefix = "ksa."
)

var (
	namespaceProfiles = source{kind: kdd.Kind{Kind: profileKind}, gvr: namespacesGVR,
		convert: derivedFrom(kdd.Kind{Kind: profileKind}, alwaysOK(derive.NamespaceProfile))}
	accountProfiles = source{kind: kdd.Kind{Kind: profileKind}, gvr: serviceAccountsGVR,
		convert: derivedFrom(kdd.Kind{Kind: profileKind}, alwaysOK(derive.ServiceAccountProfile))}
)

func alwaysOK(f func([]byte) (kdd.Read, error)) func([]byte) (kdd.Read, bool, error) {
	return func(b []byte) (kdd.Read, bool, error) {
		r, err := f(b)
		return r, true, err
	}
}

// defaultAllow is the projectcalico-default-allow profile.
func defaultAllow() (model.Object, error) {
	r, err := derive.DefaultAllow()
	o, _, err := objectOf(model.Key{Kind: profileKind, Name: r.Name}, r, err)
	return o, err
}

// getProfile reads a derived profile by name.
func (b *Backend) getProfile(ctx context.Context, key model.Key) (model.Object, error) {
	switch {
	case key.Name == derive.DefaultAllowProfile:
		return defaultAllow()
	case strings.HasPrefix(key.Name, namespaceProfilePrefix):
		return b.getFrom(ctx, namespaceProfiles, key, "", strings.TrimPrefix(key.Name, namespaceProfilePrefix))
	case strings.HasPrefix(key.Name, serviceAccountProfilePrefix):
		ns, sa, ok := strings.Cut(strings.TrimPrefix(key.Name, serviceAccountProfilePrefix), ".")
		if !ok {
			return model.Object{}, &model.NotFoundError{Key: key}
		}
		return b.getFrom(ctx, accountProfiles, key, ns, sa)
	}
	return model.Object{}, &model.NotFoundError{Key: key}
}

// listProfiles lists every derived profile: projectcalico-default-allow,
// one per Namespace and one per ServiceAccount. The revision is the two
// lists' resourceVersions, "<namespaces>/<serviceaccounts>", as Calico's.
func (b *Backend) listProfiles(ctx context.Context, opts model.ListOptions) ([]model.Object, model.Revision, error) {
	if opts.Namespace != "" || opts.Node != "" || opts.Family != 0 {
		return nil, "", fmt.Errorf("list Profile: profiles are selected by kind only")
	}
	da, err := defaultAllow()
	if err != nil {
		return nil, "", err
	}
	out := []model.Object{da}
	var revs []string
	for _, src := range []source{namespaceProfiles, accountProfiles} {
		s := selection{opts: opts, kind: src.kind, src: src}
		rev, err := b.listPages(ctx, s, func(o model.Object) { out = append(out, o) })
		if err != nil {
			return nil, "", err
		}
		revs = append(revs, string(rev))
	}
	return out, model.Revision(strings.Join(revs, "/")), nil
}

// watchProfiles follows the derived profiles: projectcalico-default-allow
// first, then a watch of Namespaces and one of ServiceAccounts, their
// events delivered one at a time. EventSynced comes once both have listed
// (and after each later re-list), at "<namespaces>/<serviceaccounts>".
func (b *Backend) watchProfiles(ctx context.Context, opts model.ListOptions, h func(model.Event)) error {
	if opts.Namespace != "" || opts.Node != "" || opts.Family != 0 {
		return fmt.Errorf("watch Profile: profiles are selected by kind only")
	}
	da, err := defaultAllow()
	if err != nil {
		return err
	}
	h(model.Event{Type: model.EventPut, Key: da.Key, Value: da.Value, Revision: da.Revision})
	var mu sync.Mutex
	revs := []string{"", ""}
	sources := []source{namespaceProfiles, accountProfiles}
	errs := make(chan error, len(sources))
	for i, src := range sources {
		sub := func(ev model.Event) {
			mu.Lock()
			defer mu.Unlock()
			if ev.Type != model.EventSynced {
				h(ev)
				return
			}
			if revs[i] = string(ev.Revision); revs[0] != "" && revs[1] != "" {
				h(model.Event{Type: model.EventSynced, Revision: model.Revision(strings.Join(revs, "/"))})
			}
		}
		go func() { errs <- b.watch(ctx, selection{opts: opts, kind: src.kind, src: src}, sub) }()
	}
	err = <-errs
	if e := <-errs; err == nil {
		err = e
	}
	return err
}
