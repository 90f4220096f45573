package kube

import (
	"context"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/calico-aio/calico-aio/k8s"
	"github.com/calico-aio/calico-aio/store/kdd"
	"github.com/calico-aio/calico-aio/store/model"
)

// pageSize is how many objects one list request asks for (Calico's).
const pageSize = 500

// selection is what a List or Watch covers, as the API server selects it
// (kind, namespace, labels) and as the backend then filters it (the IP
// family of blocks, which carry no label for it).
type selection struct {
	opts   model.ListOptions
	kind   kdd.Kind
	src    source
	labels string
}

// selectionOf checks opts.
func (b *Backend) selectionOf(opts model.ListOptions) (selection, error) {
	k, ok := kdd.LookupKind(opts.Kind)
	if !ok {
		return selection{}, fmt.Errorf("kind %q is not stored in the Kubernetes datastore", opts.Kind)
	}
	var g kdd.APIGroup
	if k.Storage != kdd.Derived {
		var err error
		if g, err = b.apiGroup(k); err != nil {
			return selection{}, fmt.Errorf("list %s: %w", k.Kind, err)
		}
	}
	src, err := sourceOf(k, g)
	if err != nil {
		return selection{}, err
	}
	s := selection{opts: opts, kind: k, src: src}
	switch {
	case opts.Namespace != "" && !k.Namespaced:
		return s, fmt.Errorf("list %s: not namespaced, but namespace %q given", k.Kind, opts.Namespace)
	case opts.Node != "" && k.Kind != kdd.KindBlockAffinity:
		return s, fmt.Errorf("list %s: only BlockAffinities are selected by node", k.Kind)
	case opts.Family != 0 && k.Kind != kdd.KindBlockAffinity && k.Kind != kdd.KindIPAMBlock:
		return s, fmt.Errorf("list %s: only blocks and affinities are selected by IP family", k.Kind)
	case opts.Family != 0 && opts.Family != 4 && opts.Family != 6:
		return s, fmt.Errorf("list %s: IP family %d: want 4 or 6", k.Kind, opts.Family)
	}
	if k.Kind == kdd.KindBlockAffinity {
		s.labels = affinitySelector(opts.Node, opts.Family)
	}
	return s, nil
}

// affinitySelector is the label selector Calico's IPAM lists a node's
// affinities with (affinity type, hostname hash, IP version, in that
// order); empty for every affinity.
func affinitySelector(node string, family int) string {
	if node == "" && family == 0 {
		return ""
	}
	parts := []string{kdd.LabelAffinityType + "=host"}
	if node != "" {
		parts = append(parts, kdd.LabelHostnameHash+"="+kdd.HostnameHash(node))
	}
	if family != 0 {
		parts = append(parts, kdd.LabelIPVersion+"="+strconv.Itoa(family))
	}
	return strings.Join(parts, ",")
}

// on is the selection's API on a dynamic client.
func (s selection) on(dyn dynamic.Interface) dynamic.ResourceInterface {
	ri := dyn.Resource(s.src.gvr)
	if s.opts.Namespace != "" {
		return ri.Namespace(s.opts.Namespace)
	}
	return ri
}

// keep says whether a converted object is selected (what the labels
// cannot say: a block's family; and the node itself, not only its hash).
func (s selection) keep(o model.Object) bool {
	if s.opts.Node != "" && o.Key.Node != s.opts.Node {
		return false
	}
	if s.opts.Family == 0 {
		return true
	}
	p, err := netip.ParsePrefix(o.Key.Name)
	return err == nil && p.Addr().Is4() == (s.opts.Family == 4)
}

// key names the selection in errors.
func (s selection) key() model.Key {
	return model.Key{Kind: s.kind.Kind, Namespace: s.opts.Namespace}
}

// List reads every object opts selects, page by page, and the
// resourceVersion of the list (the first page's: the pages are one
// snapshot).
func (b *Backend) List(ctx context.Context, opts model.ListOptions) (objs []model.Object, rev model.Revision, err error) {
	err = b.onGroup(ctx, func() error { objs, rev, err = b.list(ctx, opts); return err })
	return objs, rev, err
}

func (b *Backend) list(ctx context.Context, opts model.ListOptions) ([]model.Object, model.Revision, error) {
	if opts.Kind == profileKind {
		return b.listProfiles(ctx, opts)
	}
	s, err := b.selectionOf(opts)
	if err != nil {
		return nil, "", err
	}
	var out []model.Object
	rev, err := b.listPages(ctx, s, func(o model.Object) { out = append(out, o) })
	return out, rev, err
}

// listPages lists s and calls each for every selected object.
func (b *Backend) listPages(ctx context.Context, s selection, each func(model.Object)) (model.Revision, error) {
	lo := metav1.ListOptions{LabelSelector: s.labels, Limit: pageSize, ResourceVersion: k8s.ReadVersion(ctx)}
	rev := ""
	for {
		l, err := s.on(b.dyn).List(ctx, lo)
		if err != nil {
			return "", b.apiError("list", s.key(), "", err)
		}
		if rev == "" {
			rev = l.GetResourceVersion()
		}
		b.eachSelected(s, l.Items, each)
		lo.ResourceVersion = "" // a continued list is at its first page's version
		if lo.Continue = l.GetContinue(); lo.Continue == "" {
			return model.Revision(rev), nil
		}
	}
}

func (b *Backend) eachSelected(s selection, items []unstructured.Unstructured, each func(model.Object)) {
	for i := range items {
		if o, ok := b.readable(s.src, &items[i]); ok && s.keep(o) {
			each(o)
		}
	}
}
