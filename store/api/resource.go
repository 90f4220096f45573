// Package api holds the projectcalico.org/v3 resource types: their JSON/YAML
// shapes, defaults and validation. It does no I/O.
package api

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// APIVersion is the group/version of every resource.
const APIVersion = "projectcalico.org/v3"

// TypeMeta is the kind and apiVersion of an object.
type TypeMeta struct {
	Kind       string `json:"kind,omitempty"`
	APIVersion string `json:"apiVersion,omitempty"`

	// unmodelled is what the object was decoded with that its type does
	// not model (unmodelled.go); Marshal writes it back.
	unmodelled *unmodelled
}

// GetTypeMeta makes every kind, which embeds TypeMeta, provide half of Resource.
func (t *TypeMeta) GetTypeMeta() *TypeMeta { return t }

// ObjectMeta is the subset of Kubernetes object metadata Calico stores.
type ObjectMeta struct {
	Name              string            `json:"name,omitempty"`
	Namespace         string            `json:"namespace,omitempty"`
	ResourceVersion   string            `json:"resourceVersion,omitempty"`
	UID               string            `json:"uid,omitempty"`
	CreationTimestamp string            `json:"creationTimestamp,omitempty"`
	Labels            map[string]string `json:"labels,omitempty"`
	Annotations       map[string]string `json:"annotations,omitempty"`
}

// Resource is implemented by every kind (as a pointer to its struct).
type Resource interface {
	GetTypeMeta() *TypeMeta
	GetObjectMeta() *ObjectMeta
	// Default fills in the defaults Calico applies on write.
	Default()
	// Validate checks the whole object; the error names the bad field.
	Validate() error
}

// KindInfo describes one kind: its names and how to make an empty one.
type KindInfo struct {
	Kind       string   // "IPPool"
	Plural     string   // "ippools": the key segment in etcd
	Namespaced bool     // whether objects live in a namespace
	Aliases    []string // other accepted names on the command line: "ippool", "pool", ...
	New        func() Resource
}

var kinds = map[string]KindInfo{}

// register adds a kind to the table; called from each kind's file init.
func register(k KindInfo) {
	if _, dup := kinds[k.Kind]; dup {
		panic("api: kind registered twice: " + k.Kind)
	}
	kinds[k.Kind] = k
}

// Kinds returns every registered kind sorted by name.
func Kinds() []KindInfo {
	out := make([]KindInfo, 0, len(kinds))
	for _, k := range kinds {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Kind < out[j].Kind })
	return out
}

// LookupKind finds a kind by its Kind name, plural or any alias, ignoring case.
func LookupKind(name string) (KindInfo, bool) {
	n := strings.ToLower(name)
	for _, k := range kinds {
		if strings.ToLower(k.Kind) == n || k.Plural == n {
			return k, true
		}
		for _, a := range k.Aliases {
			if a == n {
				return k, true
			}
		}
	}
	return KindInfo{}, false
}

// NewObject returns an empty object of the kind with its TypeMeta set.
func (k KindInfo) NewObject() Resource {
	r := k.New()
	*r.GetTypeMeta() = TypeMeta{Kind: k.Kind, APIVersion: APIVersion}
	return r
}

// unservedKinds are Calico v3.32 kinds this agent has no type for, with
// why: a write of one is refused whole (nothing would act on it).
var unservedKinds = map[string]string{
	"BGPFilter":                    "BGP import/export filters are not applied (BGPPeer filters are refused too)",
	"CalicoNodeStatus":             "per-node BGP/route status objects are not produced; use calicoctl node status",
	"ClusterNetworkPolicy":         "Kubernetes admin network policies are not enforced",
	"IPReservation":                "IPAM does not read reservations, so reserved addresses would still be handed out",
	"KubeControllersConfiguration": "Calico's kube-controllers settings are not read; calico-node runs its own controller",
	"BlockAffinity":                "Calico's internal IPAM data, written by IPAM only; see calicoctl ipam",
	"IPAMBlock":                    "Calico's internal IPAM data, written by IPAM only; see calicoctl ipam",
	"IPAMHandle":                   "Calico's internal IPAM data, written by IPAM only; see calicoctl ipam",
	"IPAMConfig":                   "Calico's internal IPAM data; see calicoctl ipam configure",
}

// Decode parses one JSON object into the type named by its "kind" field.
// The apiVersion must be projectcalico.org/v3 (or empty). Members the type
// does not model are remembered with the object, and Marshal writes them
// back.
func Decode(data []byte) (Resource, error) {
	var tm TypeMeta
	if err := json.Unmarshal(data, &tm); err != nil {
		return nil, fmt.Errorf("decoding resource: %w", err)
	}
	if tm.Kind == "" {
		return nil, fmt.Errorf("resource has no kind")
	}
	if tm.APIVersion != "" && tm.APIVersion != APIVersion {
		return nil, fmt.Errorf("unsupported apiVersion %q for kind %q (want %s)", tm.APIVersion, tm.Kind, APIVersion)
	}
	k, ok := kinds[tm.Kind]
	if why, unserved := unservedKinds[tm.Kind]; !ok && unserved {
		return nil, fmt.Errorf("kind %q is not supported by this agent: %s", tm.Kind, why)
	}
	if !ok {
		return nil, fmt.Errorf("unknown kind %q", tm.Kind)
	}
	r := k.NewObject()
	if err := json.Unmarshal(data, r); err != nil {
		return nil, fmt.Errorf("decoding %s: %w", tm.Kind, err)
	}
	*r.GetTypeMeta() = TypeMeta{Kind: k.Kind, APIVersion: APIVersion}
	if err := rememberUnmodelled(r, data); err != nil {
		return nil, fmt.Errorf("decoding %s: %w", tm.Kind, err)
	}
	return r, nil
}
