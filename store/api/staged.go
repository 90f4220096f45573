package api

import "encoding/json"

// Staged policies are stored and listed, never enforced, as in Calico: they
// show what a policy change would do before it is made. The agent's
// calculation ignores their plurals.

// StagedAction says what promoting a staged policy would do.
type StagedAction string

const (
	StagedActionSet    StagedAction = "Set"
	StagedActionDelete StagedAction = "Delete"
)

// StagedNetworkPolicy is a NetworkPolicy that is staged, not enforced.
type StagedNetworkPolicy struct {
	TypeMeta
	Metadata ObjectMeta              `json:"metadata"`
	Spec     StagedNetworkPolicySpec `json:"spec"`
}

// StagedNetworkPolicySpec is projectcalico.org/v3 StagedNetworkPolicy.spec:
// the stagedAction plus a NetworkPolicy spec.
type StagedNetworkPolicySpec struct {
	StagedAction StagedAction `json:"stagedAction,omitempty"`
	NetworkPolicySpec
}

// StagedGlobalNetworkPolicy is a GlobalNetworkPolicy that is staged, not
// enforced.
type StagedGlobalNetworkPolicy struct {
	TypeMeta
	Metadata ObjectMeta                    `json:"metadata"`
	Spec     StagedGlobalNetworkPolicySpec `json:"spec"`
}

// StagedGlobalNetworkPolicySpec is the stagedAction plus a
// GlobalNetworkPolicy spec.
type StagedGlobalNetworkPolicySpec struct {
	StagedAction StagedAction `json:"stagedAction,omitempty"`
	GlobalNetworkPolicySpec
}

// StagedKubernetesNetworkPolicy is a Kubernetes NetworkPolicy that is
// staged, not enforced.
type StagedKubernetesNetworkPolicy struct {
	TypeMeta
	Metadata ObjectMeta                        `json:"metadata"`
	Spec     StagedKubernetesNetworkPolicySpec `json:"spec"`
}

// StagedKubernetesNetworkPolicySpec is the stagedAction plus the fields of
// a networking.k8s.io/v1 NetworkPolicy spec, kept as written: nothing reads
// them.
type StagedKubernetesNetworkPolicySpec struct {
	StagedAction StagedAction      `json:"stagedAction,omitempty"`
	PodSelector  json.RawMessage   `json:"podSelector,omitempty"`
	Ingress      []json.RawMessage `json:"ingress,omitempty"`
	Egress       []json.RawMessage `json:"egress,omitempty"`
	PolicyTypes  []string          `json:"policyTypes,omitempty"`
}

func init() {
	register(KindInfo{
		Kind: "StagedNetworkPolicy", Plural: "stagednetworkpolicies", Namespaced: true,
		Aliases: []string{"stagednetworkpolicy", "snp", "snps"},
		New:     func() Resource { return &StagedNetworkPolicy{} },
	})
	register(KindInfo{
		Kind: "StagedGlobalNetworkPolicy", Plural: "stagedglobalnetworkpolicies",
		Aliases: []string{"stagedglobalnetworkpolicy", "sgnp", "sgnps"},
		New:     func() Resource { return &StagedGlobalNetworkPolicy{} },
	})
	register(KindInfo{
		Kind: "StagedKubernetesNetworkPolicy", Plural: "stagedkubernetesnetworkpolicies", Namespaced: true,
		Aliases: []string{"stagedkubernetesnetworkpolicy", "sknp", "sknps"},
		New:     func() Resource { return &StagedKubernetesNetworkPolicy{} },
	})
}

func (p *StagedNetworkPolicy) GetObjectMeta() *ObjectMeta           { return &p.Metadata }
func (p *StagedGlobalNetworkPolicy) GetObjectMeta() *ObjectMeta     { return &p.Metadata }
func (p *StagedKubernetesNetworkPolicy) GetObjectMeta() *ObjectMeta { return &p.Metadata }

// Default sets stagedAction Set and, for a staged Set, the policy defaults;
// it labels the policy with its tier.
func (p *StagedNetworkPolicy) Default() {
	if p.Spec.StagedAction == "" {
		p.Spec.StagedAction = StagedActionSet
	}
	if p.Spec.StagedAction == StagedActionSet {
		np := NetworkPolicy{Spec: p.Spec.NetworkPolicySpec}
		np.Default()
		p.Spec.NetworkPolicySpec = np.Spec
	}
	setTierLabel(&p.Metadata, p.Spec.Tier)
}

// Default sets stagedAction Set and, for a staged Set, the policy defaults;
// it labels the policy with its tier.
func (p *StagedGlobalNetworkPolicy) Default() {
	if p.Spec.StagedAction == "" {
		p.Spec.StagedAction = StagedActionSet
	}
	if p.Spec.StagedAction == StagedActionSet {
		gnp := GlobalNetworkPolicy{Spec: p.Spec.GlobalNetworkPolicySpec}
		gnp.Default()
		p.Spec.GlobalNetworkPolicySpec = gnp.Spec
	}
	setTierLabel(&p.Metadata, p.Spec.Tier)
}

// Default sets stagedAction Set.
func (p *StagedKubernetesNetworkPolicy) Default() {
	if p.Spec.StagedAction == "" {
		p.Spec.StagedAction = StagedActionSet
	}
}

// Validate checks the stagedAction and the policy as NetworkPolicy does,
// without refusing what the agent does not support: a staged policy is
// never enforced, here or in Calico.
func (p *StagedNetworkPolicy) Validate() error {
	var f fieldErrs
	f.oneOf("spec.stagedAction", string(p.Spec.StagedAction), "Set", "Delete")
	f.networkPolicy(&p.Metadata, &p.Spec.NetworkPolicySpec)
	return f.join()
}

// Validate checks the stagedAction and the policy as GlobalNetworkPolicy
// does, without refusing what the agent does not support.
func (p *StagedGlobalNetworkPolicy) Validate() error {
	var f fieldErrs
	f.oneOf("spec.stagedAction", string(p.Spec.StagedAction), "Set", "Delete")
	f.globalNetworkPolicy(&p.Metadata, &p.Spec.GlobalNetworkPolicySpec)
	return f.join()
}

// Validate checks the name, namespace and stagedAction; the Kubernetes
// policy body is kept as written.
func (p *StagedKubernetesNetworkPolicy) Validate() error {
	var f fieldErrs
	f.meta(&p.Metadata, true, subdomainProblem)
	f.oneOf("spec.stagedAction", string(p.Spec.StagedAction), "Set", "Delete")
	for i, t := range p.Spec.PolicyTypes {
		f.oneOf(idx("spec.policyTypes", i), t, "Ingress", "Egress")
	}
	return f.join()
}
