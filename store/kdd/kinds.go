package kdd

import "sort"

// Group and version of Calico's custom resources (what Calico's default
// manifest installs).
const (
	Group      = "crd.projectcalico.org"
	Version    = "v1"
	APIVersion = Group + "/" + Version
	// ModelAPIVersion is the apiVersion of the model objects.
	ModelAPIVersion = "projectcalico.org/v3"
)

// Storage says how a kind is kept in a Kubernetes datastore.
type Storage int

const (
	// Resource kinds are custom resources of the same kind, converted by
	// ModelToCR and CRToModel.
	Resource Storage = iota
	// IPAM kinds are custom resources holding an etcd-shaped IPAM value
	// (ipamcr.go).
	IPAM
	// Derived kinds have no custom resource: Calico derives them from a
	// Kubernetes object (Resource names it: nodes, pods, namespaces).
	Derived
)

// Kind is one kind served in a Kubernetes datastore.
type Kind struct {
	Kind       string // "IPPool"
	Resource   string // plural of the API resource: "ippools"; for derived kinds the core resource (Profile: namespaces, and serviceaccounts for ksa.*)
	Namespaced bool
	Storage    Storage
	// NameInMeta: the metadata annotation carries the name too (Calico's
	// tiered policies).
	NameInMeta bool
	// ModelStatus: the model always has a status ("status":{} when empty).
	ModelStatus bool
	// CRStatus: the CRD has a status field.
	CRStatus bool
}

// IPAM kind names.
const (
	KindIPAMBlock     = "IPAMBlock"
	KindBlockAffinity = "BlockAffinity"
	KindIPAMHandle    = "IPAMHandle"
	KindIPAMConfig    = "IPAMConfig"
)

var kinds = map[string]Kind{}

func init() {
	for _, k := range []Kind{
		{Kind: "BGPConfiguration", Resource: "bgpconfigurations"},
		{Kind: "BGPFilter", Resource: "bgpfilters"},
		{Kind: "BGPPeer", Resource: "bgppeers"},
		{Kind: "ClusterInformation", Resource: "clusterinformations"},
		{Kind: "FelixConfiguration", Resource: "felixconfigurations"},
		{Kind: "GlobalNetworkPolicy", Resource: "globalnetworkpolicies", NameInMeta: true},
		{Kind: "GlobalNetworkSet", Resource: "globalnetworksets"},
		{Kind: "HostEndpoint", Resource: "hostendpoints"},
		{Kind: "IPPool", Resource: "ippools"},
		{Kind: "IPReservation", Resource: "ipreservations"},
		{Kind: "KubeControllersConfiguration", Resource: "kubecontrollersconfigurations", ModelStatus: true, CRStatus: true},
		{Kind: "NetworkPolicy", Resource: "networkpolicies", Namespaced: true, NameInMeta: true},
		{Kind: "NetworkSet", Resource: "networksets", Namespaced: true},
		{Kind: "StagedGlobalNetworkPolicy", Resource: "stagedglobalnetworkpolicies", NameInMeta: true},
		{Kind: "StagedKubernetesNetworkPolicy", Resource: "stagedkubernetesnetworkpolicies", Namespaced: true},
		{Kind: "StagedNetworkPolicy", Resource: "stagednetworkpolicies", Namespaced: true, NameInMeta: true},
		{Kind: "Tier", Resource: "tiers", ModelStatus: true},
		{Kind: KindIPAMBlock, Resource: "ipamblocks", Storage: IPAM},
		{Kind: KindBlockAffinity, Resource: "blockaffinities", Storage: IPAM},
		{Kind: KindIPAMHandle, Resource: "ipamhandles", Storage: IPAM},
		{Kind: KindIPAMConfig, Resource: "ipamconfigs", Storage: IPAM},
		{Kind: "Node", Resource: "nodes", Storage: Derived, ModelStatus: true},
		{Kind: "WorkloadEndpoint", Resource: "pods", Namespaced: true, Storage: Derived},
		{Kind: "Profile", Resource: "namespaces", Storage: Derived},
	} {
		kinds[k.Kind] = k
	}
}

// LookupKind finds a kind by its name ("IPPool").
func LookupKind(kind string) (Kind, bool) {
	k, ok := kinds[kind]
	return k, ok
}

// Kinds returns every kind, sorted by name.
func Kinds() []Kind {
	out := make([]Kind, 0, len(kinds))
	for _, k := range kinds {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Kind < out[j].Kind })
	return out
}
