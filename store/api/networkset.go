package api

// NetworkSet is a namespaced, labelled set of networks that rule selectors
// can match.
type NetworkSet struct {
	TypeMeta
	Metadata ObjectMeta     `json:"metadata"`
	Spec     NetworkSetSpec `json:"spec"`
}

// GlobalNetworkSet is the cluster-wide NetworkSet.
type GlobalNetworkSet struct {
	TypeMeta
	Metadata ObjectMeta     `json:"metadata"`
	Spec     NetworkSetSpec `json:"spec"`
}

// NetworkSetSpec is the spec of both network set kinds: CIDRs or addresses.
type NetworkSetSpec struct {
	Nets []string `json:"nets,omitempty"`
}

func init() {
	register(KindInfo{
		Kind: "NetworkSet", Plural: "networksets", Namespaced: true,
		Aliases: []string{"networkset", "netset", "netsets"},
		New:     func() Resource { return &NetworkSet{} },
	})
	register(KindInfo{
		Kind: "GlobalNetworkSet", Plural: "globalnetworksets",
		Aliases: []string{"globalnetworkset", "gns"},
		New:     func() Resource { return &GlobalNetworkSet{} },
	})
}

func (n *NetworkSet) GetObjectMeta() *ObjectMeta       { return &n.Metadata }
func (n *GlobalNetworkSet) GetObjectMeta() *ObjectMeta { return &n.Metadata }

// Default does nothing: Calico fills no network set fields on write.
func (n *NetworkSet) Default() {}

// Default does nothing: Calico fills no network set fields on write.
func (n *GlobalNetworkSet) Default() {}

// Validate checks the nets and that the reserved namespace label is unused.
func (n *NetworkSet) Validate() error { return validateNetworkSet(&n.Metadata, &n.Spec, true) }

// Validate checks the nets and that the reserved namespace label is unused.
func (n *GlobalNetworkSet) Validate() error {
	return validateNetworkSet(&n.Metadata, &n.Spec, false)
}

func validateNetworkSet(m *ObjectMeta, s *NetworkSetSpec, namespaced bool) error {
	var f fieldErrs
	f.meta(m, namespaced, subdomainProblem)
	if _, ok := m.Labels[LabelNamespace]; ok {
		f.add("metadata.labels", LabelNamespace, "is reserved for workload endpoints")
	}
	for i, n := range s.Nets {
		f.cidr(idx("spec.nets", i), n, 0, false)
	}
	return f.join()
}
