package api

import "strings"

// PolicyType says which direction of traffic a policy applies to.
type PolicyType string

const (
	PolicyTypeIngress PolicyType = "Ingress"
	PolicyTypeEgress  PolicyType = "Egress"

	// DefaultTierName is the tier of policies that name none.
	DefaultTierName = "default"
)

// NetworkPolicy is a namespaced, selector-based security policy.
type NetworkPolicy struct {
	TypeMeta
	Metadata ObjectMeta        `json:"metadata"`
	Spec     NetworkPolicySpec `json:"spec"`
}

// NetworkPolicySpec is projectcalico.org/v3 NetworkPolicy.spec. An empty
// selector selects all() endpoints in the namespace.
type NetworkPolicySpec struct {
	Tier                   string       `json:"tier,omitempty"`
	Order                  *float64     `json:"order,omitempty"`
	Ingress                []Rule       `json:"ingress,omitempty"`
	Egress                 []Rule       `json:"egress,omitempty"`
	Selector               string       `json:"selector,omitempty"`
	Types                  []PolicyType `json:"types,omitempty"`
	ServiceAccountSelector string       `json:"serviceAccountSelector,omitempty"`
	PerformanceHints       []string     `json:"performanceHints,omitempty"`
}

// GlobalNetworkPolicy is a cluster-wide, selector-based security policy.
type GlobalNetworkPolicy struct {
	TypeMeta
	Metadata ObjectMeta              `json:"metadata"`
	Spec     GlobalNetworkPolicySpec `json:"spec"`
}

// GlobalNetworkPolicySpec is projectcalico.org/v3 GlobalNetworkPolicy.spec.
type GlobalNetworkPolicySpec struct {
	Tier                   string       `json:"tier,omitempty"`
	Order                  *float64     `json:"order,omitempty"`
	Ingress                []Rule       `json:"ingress,omitempty"`
	Egress                 []Rule       `json:"egress,omitempty"`
	Selector               string       `json:"selector,omitempty"`
	Types                  []PolicyType `json:"types,omitempty"`
	DoNotTrack             bool         `json:"doNotTrack,omitempty"`
	PreDNAT                bool         `json:"preDNAT,omitempty"`
	ApplyOnForward         bool         `json:"applyOnForward,omitempty"`
	ServiceAccountSelector string       `json:"serviceAccountSelector,omitempty"`
	NamespaceSelector      string       `json:"namespaceSelector,omitempty"`
	PerformanceHints       []string     `json:"performanceHints,omitempty"`
}

// Profile is a set of rules and labels that endpoints name in spec.profiles.
type Profile struct {
	TypeMeta
	Metadata ObjectMeta  `json:"metadata"`
	Spec     ProfileSpec `json:"spec"`
}

// ProfileSpec is projectcalico.org/v3 Profile.spec.
type ProfileSpec struct {
	Ingress       []Rule            `json:"ingress,omitempty"`
	Egress        []Rule            `json:"egress,omitempty"`
	LabelsToApply map[string]string `json:"labelsToApply,omitempty"`
}

func init() {
	register(KindInfo{
		Kind: "NetworkPolicy", Plural: "networkpolicies", Namespaced: true,
		Aliases: []string{"networkpolicy", "policy", "policies", "netpol", "np", "pol", "pols"},
		New:     func() Resource { return &NetworkPolicy{} },
	})
	register(KindInfo{
		Kind: "GlobalNetworkPolicy", Plural: "globalnetworkpolicies",
		Aliases: []string{"globalnetworkpolicy", "gnp", "gnps", "cgnp", "cgnps"},
		New:     func() Resource { return &GlobalNetworkPolicy{} },
	})
	register(KindInfo{
		Kind: "Profile", Plural: "profiles",
		Aliases: []string{"profile", "pro", "pros"},
		New:     func() Resource { return &Profile{} },
	})
}

func (p *NetworkPolicy) GetObjectMeta() *ObjectMeta       { return &p.Metadata }
func (p *GlobalNetworkPolicy) GetObjectMeta() *ObjectMeta { return &p.Metadata }
func (p *Profile) GetObjectMeta() *ObjectMeta             { return &p.Metadata }

// DefaultPolicyTypes is what Calico stores when a policy gives no types:
// Ingress unless the policy has only egress rules, plus Egress when it has
// egress rules.
func DefaultPolicyTypes(ingress, egress []Rule) []PolicyType {
	var t []PolicyType
	if len(ingress) > 0 || len(egress) == 0 {
		t = append(t, PolicyTypeIngress)
	}
	if len(egress) > 0 {
		t = append(t, PolicyTypeEgress)
	}
	return t
}

// Default sets the tier to "default", labels the policy with its tier and
// fills in types.
func (p *NetworkPolicy) Default() {
	if p.Spec.Tier == "" {
		p.Spec.Tier = DefaultTierName
	}
	setTierLabel(&p.Metadata, p.Spec.Tier)
	if len(p.Spec.Types) == 0 {
		p.Spec.Types = DefaultPolicyTypes(p.Spec.Ingress, p.Spec.Egress)
	}
}

// Default sets the tier to "default", labels the policy with its tier and
// fills in types.
func (p *GlobalNetworkPolicy) Default() {
	if p.Spec.Tier == "" {
		p.Spec.Tier = DefaultTierName
	}
	setTierLabel(&p.Metadata, p.Spec.Tier)
	if len(p.Spec.Types) == 0 {
		p.Spec.Types = DefaultPolicyTypes(p.Spec.Ingress, p.Spec.Egress)
	}
}

// TierLabel is the label Calico puts on every tiered policy on write: the
// name of its tier, so policies can be listed by tier.
const TierLabel = "projectcalico.org/tier"

// setTierLabel sets the tier label, replacing any value the writer gave.
func setTierLabel(m *ObjectMeta, tier string) {
	if tier == "" {
		return
	}
	if m.Labels == nil {
		m.Labels = map[string]string{}
	}
	m.Labels[TierLabel] = tier
}

// Default does nothing: Calico fills no Profile fields on write.
func (p *Profile) Default() {}

// policyCommon checks what NetworkPolicy and GlobalNetworkPolicy share.
func (f *fieldErrs) policyCommon(tier, sel, saSel string, types []PolicyType, hints []string, ingress, egress []Rule) {
	if tier != "" {
		if p := dnsLabelProblem(tier); p != "" {
			f.add("spec.tier", tier, p)
		}
	}
	for _, s := range []struct{ field, sel string }{{"spec.selector", sel}, {"spec.serviceAccountSelector", saSel}} {
		f.selector(s.field, s.sel)
		if strings.Contains(s.sel, "global(") {
			f.add(s.field, s.sel, "cannot use global(): it is only valid in a rule's namespaceSelector")
		}
	}
	seen := map[PolicyType]bool{}
	for i, t := range types {
		f.oneOf(idx("spec.types", i), string(t), "Ingress", "Egress")
		if seen[t] {
			f.add(idx("spec.types", i), string(t), "is listed twice")
		}
		seen[t] = true
	}
	for i, h := range hints {
		f.oneOf(idx("spec.performanceHints", i), h, "AssumeNeededOnEveryNode")
	}
	f.rules("spec.ingress", ingress)
	f.rules("spec.egress", egress)
	for i := range egress {
		if egress[i].Source.Services != nil {
			f.add(idx("spec.egress", i)+".source.services", "", "is not allowed in an egress rule")
		}
		if egress[i].HTTP != nil {
			f.add(idx("spec.egress", i)+".http", "", "is not allowed in an egress rule")
		}
	}
	for i := range ingress {
		if ingress[i].Destination.Services != nil {
			f.add(idx("spec.ingress", i)+".destination.services", "", "is not allowed in an ingress rule")
		}
	}
}

// Validate checks the name (a label, optionally "<tier>.<name>"), selectors,
// types and rules.
func (p *NetworkPolicy) Validate() error {
	var f fieldErrs
	f.unsupported(p)
	f.networkPolicy(&p.Metadata, &p.Spec)
	return f.join()
}

// networkPolicy checks a NetworkPolicy's (or a staged one's) name and spec.
func (f *fieldErrs) networkPolicy(m *ObjectMeta, s *NetworkPolicySpec) {
	f.meta(m, true, regexNameProblem(npNameRe(), "a DNS label, optionally prefixed by '<tier>.'"))
	f.policyCommon(s.Tier, s.Selector, s.ServiceAccountSelector, s.Types, s.PerformanceHints, s.Ingress, s.Egress)
}

// Validate checks as NetworkPolicy does, plus the doNotTrack, preDNAT and
// applyOnForward combinations Calico allows.
func (p *GlobalNetworkPolicy) Validate() error {
	var f fieldErrs
	f.unsupported(p)
	f.globalNetworkPolicy(&p.Metadata, &p.Spec)
	return f.join()
}

// globalNetworkPolicy checks a GlobalNetworkPolicy's (or a staged one's)
// name and spec.
func (f *fieldErrs) globalNetworkPolicy(m *ObjectMeta, s *GlobalNetworkPolicySpec) {
	f.meta(m, false, regexNameProblem(gnpNameRe(), "a DNS label, optionally prefixed by '<tier>.'"))
	f.policyCommon(s.Tier, s.Selector, s.ServiceAccountSelector, s.Types, s.PerformanceHints, s.Ingress, s.Egress)
	f.selector("spec.namespaceSelector", s.NamespaceSelector)
	if strings.Contains(s.NamespaceSelector, "global(") {
		f.add("spec.namespaceSelector", s.NamespaceSelector, "cannot use global(): it is only valid in a rule's namespaceSelector")
	}
	if s.DoNotTrack && s.PreDNAT {
		f.add("spec.preDNAT", "", "cannot be true together with doNotTrack")
	}
	if s.PreDNAT && len(s.Egress) > 0 {
		f.add("spec.egress", "", "must be empty in a preDNAT policy")
	}
	if s.PreDNAT {
		for i, t := range s.Types {
			if t == PolicyTypeEgress {
				f.add(idx("spec.types", i), string(t), "is not allowed in a preDNAT policy")
			}
		}
	}
	if (s.DoNotTrack || s.PreDNAT) && !s.ApplyOnForward {
		f.add("spec.applyOnForward", "", "must be true when doNotTrack or preDNAT is true")
	}
	for _, rs := range []struct {
		path  string
		rules []Rule
	}{{"spec.ingress", s.Ingress}, {"spec.egress", s.Egress}} {
		for i, r := range rs.rules {
			if sv := r.Source.Services; sv != nil && rs.path == "spec.ingress" && sv.Namespace == "" {
				f.add(idx(rs.path, i)+".source.services.namespace", "", "is required in a global policy")
			}
			if sv := r.Destination.Services; sv != nil && rs.path == "spec.egress" && sv.Namespace == "" {
				f.add(idx(rs.path, i)+".destination.services.namespace", "", "is required in a global policy")
			}
		}
	}
}

// Validate checks the rules and the labels to apply.
func (p *Profile) Validate() error {
	var f fieldErrs
	f.unsupported(p)
	f.meta(&p.Metadata, false, subdomainProblem)
	f.rules("spec.ingress", p.Spec.Ingress)
	f.rules("spec.egress", p.Spec.Egress)
	f.labels("spec.labelsToApply", p.Spec.LabelsToApply)
	return f.join()
}
