package api

import "strconv"

// Tier is an ordered group of policies; a Pass action jumps to the next tier.
type Tier struct {
	TypeMeta
	Metadata ObjectMeta `json:"metadata"`
	Spec     TierSpec   `json:"spec"`
	// Status is always written, as "status":{} when empty, like Calico.
	Status TierStatus `json:"status"`
}

// TierSpec is projectcalico.org/v3 Tier.spec. A nil order sorts last.
type TierSpec struct {
	Order         *float64 `json:"order,omitempty"`
	DefaultAction Action   `json:"defaultAction,omitempty"` // Deny or Pass
}

// TierStatus carries the conditions Calico may report for a tier.
type TierStatus struct {
	Conditions []Condition `json:"conditions,omitempty"`
}

// Condition is a Kubernetes-style status condition.
type Condition struct {
	Type               string `json:"type"`
	Status             string `json:"status"`
	ObservedGeneration int64  `json:"observedGeneration,omitempty"`
	LastTransitionTime string `json:"lastTransitionTime,omitempty"`
	Reason             string `json:"reason,omitempty"`
	Message            string `json:"message,omitempty"`
}

// Names of the tiers Calico creates besides "default".
const (
	KubeAdminTierName    = "kube-admin"
	KubeBaselineTierName = "kube-baseline"
)

// The tiers Calico creates, and the orders it requires of them.
var wellKnownTierOrders = map[string]float64{
	DefaultTierName:      1_000_000,
	KubeAdminTierName:    1_000,
	KubeBaselineTierName: 10_000_000,
}

// wellKnownTierAction is the defaultAction Calico gives its own tiers.
func wellKnownTierAction(name string) Action {
	if name == KubeAdminTierName || name == KubeBaselineTierName {
		return ActionPass
	}
	return ActionDeny
}

// WellKnownTiers are the tiers Calico creates (calico-node ensures they
// exist at start), as it writes them: "default" (order 1000000, Deny),
// "kube-admin" (1000, Pass) and "kube-baseline" (10000000, Pass), sorted
// by name.
func WellKnownTiers() []*Tier {
	return []*Tier{WellKnownTier(DefaultTierName), WellKnownTier(KubeAdminTierName), WellKnownTier(KubeBaselineTierName)}
}

// WellKnownTier returns Calico's own tier of that name, as it creates it,
// or nil when name is not one of them. The agent uses it for such a tier
// before its object is seen.
func WellKnownTier(name string) *Tier {
	if _, ok := wellKnownTierOrders[name]; !ok {
		return nil
	}
	t := &Tier{TypeMeta: TypeMeta{Kind: "Tier", APIVersion: APIVersion}, Metadata: ObjectMeta{Name: name}}
	t.Default()
	return t
}

func init() {
	register(KindInfo{
		Kind: "Tier", Plural: "tiers",
		Aliases: []string{"tier"},
		New:     func() Resource { return &Tier{} },
	})
}

func (t *Tier) GetObjectMeta() *ObjectMeta { return &t.Metadata }

// Default sets defaultAction Deny (Pass for kube-admin and kube-baseline,
// as Calico creates them) and, for Calico's own tiers, their order.
func (t *Tier) Default() {
	if t.Spec.DefaultAction == "" {
		t.Spec.DefaultAction = wellKnownTierAction(t.Metadata.Name)
	}
	if o, ok := wellKnownTierOrders[t.Metadata.Name]; ok && t.Spec.Order == nil {
		t.Spec.Order = &o
	}
}

// Validate checks the name (a DNS label: tiers prefix policy names), the
// default action and the fixed orders of Calico's own tiers.
func (t *Tier) Validate() error {
	var f fieldErrs
	f.meta(&t.Metadata, false, dnsLabelProblem)
	f.oneOf("spec.defaultAction", string(t.Spec.DefaultAction), "Deny", "Pass")
	if want, ok := wellKnownTierOrders[t.Metadata.Name]; ok && (t.Spec.Order == nil || *t.Spec.Order != want) {
		got := ""
		if t.Spec.Order != nil {
			got = strconv.FormatFloat(*t.Spec.Order, 'f', -1, 64)
		}
		f.add("spec.order", got, "must be "+strconv.FormatFloat(want, 'f', -1, 64)+" for tier "+t.Metadata.Name)
	}
	return f.join()
}
