package kube

import (
	"fmt"
	"net/netip"
	"sync"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/calico-aio/calico-aio/k8s"
	"github.com/calico-aio/calico-aio/store/kdd"
	"github.com/calico-aio/calico-aio/store/model"
)

// Backend keeps Calico's model in a Kubernetes API server.
type Backend struct {
	client *k8s.Client
	dyn    dynamic.Interface // requests time out after k8s.RequestTimeout

	// groupMu guards group: the API group of Calico's resource kinds,
	// empty until discovery settles it (group.go).
	groupMu sync.Mutex
	group   kdd.APIGroup

	mu sync.Mutex
	// uids are the uids of IPAMHandles and of pods at the revision last
	// seen (uidKey): a handle delete and an endpoint delete carry Calico's
	// uid precondition.
	uids map[string]seenUID
	// pods are the pods read lately, for the endpoint write that follows
	// (podmemo.go).
	pods map[string]seenPod
	// unreadable are the custom resources (name@revision) already logged
	// as unreadable, so each is logged once.
	unreadable map[string]bool
}

type seenUID struct{ rev, uid string }

var _ model.Backend = (*Backend)(nil)

// New is a backend on the API server a kubeconfig names (kubeconfigPath
// when set, else $KUBECONFIG, ~/.kube/config or the in-cluster config: the
// rules of k8s.NewClient). It does not contact the server.
func New(kubeconfigPath string) (*Backend, error) {
	c, err := k8s.NewClient(kubeconfigPath)
	if err != nil {
		return nil, err
	}
	return NewWithClient(c), nil
}

// NewWithClient is a backend sharing c's configuration and connections,
// on the crd.projectcalico.org/v1 CRDs.
func NewWithClient(c *k8s.Client) *Backend {
	return NewWithGroup(c, kdd.APIGroupV1)
}

// NewWithGroup is NewWithClient on the CRDs of group; with none, the
// group is discovered with Calico's rule at the first call (group.go).
func NewWithGroup(c *k8s.Client, group kdd.APIGroup) *Backend {
	return &Backend{client: c, dyn: c.Dynamic(), group: group, uids: map[string]seenUID{}, pods: map[string]seenPod{}, unreadable: map[string]bool{}}
}

// Atomic is false: Commit applies its writes one object at a time.
func (b *Backend) Atomic() bool { return false }

// Close releases nothing: client-go's connections close when idle.
func (b *Backend) Close() error { return nil }

// ref is where one model object lives in the API server.
type ref struct {
	kind  kdd.Kind
	ns    string
	name  string       // the custom resource's name
	cidr  netip.Prefix // IPAMBlock and BlockAffinity
	group kdd.APIGroup
	gvr   schema.GroupVersionResource
}

func gvrOf(k kdd.Kind, g kdd.APIGroup) schema.GroupVersionResource {
	group, version := g.GroupVersion()
	return schema.GroupVersionResource{Group: group, Version: version, Resource: k.Resource}
}

// storedKind is the kind of a key or list, if this backend stores it.
func storedKind(kind string) (kdd.Kind, error) {
	k, ok := kdd.LookupKind(kind)
	switch {
	case !ok:
		return k, fmt.Errorf("kind %q is not stored in the Kubernetes datastore", kind)
	case k.Storage == kdd.Derived:
		return k, fmt.Errorf("kind %s: in the Kubernetes datastore it is derived from the Kubernetes %s, not stored as a custom resource", kind, k.Resource)
	}
	return k, nil
}

// refOf checks a key and says where its object lives.
func (b *Backend) refOf(key model.Key) (ref, error) {
	k, err := storedKind(key.Kind)
	if err != nil {
		return ref{}, fmt.Errorf("%s: %w", key, err)
	}
	g, err := b.apiGroup(k)
	if err != nil {
		return ref{}, fmt.Errorf("%s: %w", key, err)
	}
	r := ref{kind: k, ns: key.Namespace, name: key.Name, group: g, gvr: gvrOf(k, g)}
	if key.Name == "" {
		return r, fmt.Errorf("%s: no name", key)
	}
	if key.Node != "" && k.Kind != kdd.KindBlockAffinity {
		return r, fmt.Errorf("%s: only a BlockAffinity key names a node", key)
	}
	if k.Namespaced != (key.Namespace != "") {
		return r, fmt.Errorf("%s: a %s is namespaced: %v", key, k.Kind, k.Namespaced)
	}
	switch k.Kind {
	case kdd.KindIPAMBlock, kdd.KindBlockAffinity:
		if r.cidr, err = blockCIDR(key); err != nil {
			return r, err
		}
		r.name = kdd.BlockName(r.cidr)
		if k.Kind == kdd.KindBlockAffinity {
			if key.Node == "" {
				return r, fmt.Errorf("%s: a BlockAffinity key names its node", key)
			}
			r.name = kdd.AffinityName(key.Node, r.cidr)
		}
	case kdd.KindIPAMHandle:
		r.name = kdd.HandleName(key.Name)
	case kdd.KindIPAMConfig:
		if key.Name != kdd.IPAMConfigName {
			return r, fmt.Errorf("%s: the IPAM config is named %q", key, kdd.IPAMConfigName)
		}
	}
	return r, nil
}

// blockCIDR is a block key's CIDR, which must be written as Calico reads
// it back (masked, canonical).
func blockCIDR(key model.Key) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(key.Name)
	if err != nil {
		return p, fmt.Errorf("%s: block CIDR: %w", key, err)
	}
	if p.Masked().String() != key.Name {
		return p, fmt.Errorf("%s: block CIDR %q is not canonical (want %s)", key, key.Name, p.Masked())
	}
	return p, nil
}

// resource is the API of r's kind, in r's namespace when namespaced.
func (b *Backend) resource(r ref) dynamic.ResourceInterface {
	ri := b.dyn.Resource(r.gvr)
	if r.kind.Namespaced {
		return ri.Namespace(r.ns)
	}
	return ri
}
