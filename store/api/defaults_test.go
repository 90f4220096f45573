package api

import (
	"reflect"
	"strings"
	"testing"
)

func TestIPPoolDefaults(t *testing.T) {
	both := []IPPoolAllowedUse{IPPoolAllowedUseWorkload, IPPoolAllowedUseTunnel}
	for _, tc := range []struct {
		name string
		in   IPPoolSpec
		want IPPoolSpec
	}{
		{"ipv4", IPPoolSpec{CIDR: "10.48.0.0/16", NATOutgoing: true}, IPPoolSpec{
			CIDR: "10.48.0.0/16", NATOutgoing: true, BlockSize: 26, NodeSelector: "all()",
			IPIPMode: "Never", VXLANMode: "Never", AllowedUses: both, AssignmentMode: "Automatic",
		}},
		{"ipv6", IPPoolSpec{CIDR: "fd00:48::/48"}, IPPoolSpec{
			CIDR: "fd00:48::/48", BlockSize: 122, NodeSelector: "all()",
			IPIPMode: "Never", VXLANMode: "Never", AllowedUses: both, AssignmentMode: "Automatic",
		}},
		{"host bits masked", IPPoolSpec{CIDR: "10.0.0.1/16"}, IPPoolSpec{
			CIDR: "10.0.0.0/16", BlockSize: 26, NodeSelector: "all()",
			IPIPMode: "Never", VXLANMode: "Never", AllowedUses: both, AssignmentMode: "Automatic",
		}},
		{"ipv6 host bits masked", IPPoolSpec{CIDR: "fd00:48::1/48"}, IPPoolSpec{
			CIDR: "fd00:48::/48", BlockSize: 122, NodeSelector: "all()",
			IPIPMode: "Never", VXLANMode: "Never", AllowedUses: both, AssignmentMode: "Automatic",
		}},
		{"explicit values kept", IPPoolSpec{
			CIDR: "10.1.0.0/16", BlockSize: 24, NodeSelector: "zone == 'a'", IPIPMode: "CrossSubnet",
			VXLANMode: "Never", AllowedUses: []IPPoolAllowedUse{"LoadBalancer"}, AssignmentMode: "Manual",
		}, IPPoolSpec{
			CIDR: "10.1.0.0/16", BlockSize: 24, NodeSelector: "zone == 'a'", IPIPMode: "CrossSubnet",
			VXLANMode: "Never", AllowedUses: []IPPoolAllowedUse{"LoadBalancer"}, AssignmentMode: "Manual",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &IPPool{Metadata: ObjectMeta{Name: "p"}, Spec: tc.in}
			p.Default()
			if !reflect.DeepEqual(p.Spec, tc.want) {
				t.Errorf("got  %+v\nwant %+v", p.Spec, tc.want)
			}
		})
	}
}

func TestPolicyDefaults(t *testing.T) {
	allow := Rule{Action: ActionAllow}
	for _, tc := range []struct {
		name            string
		ingress, egress []Rule
		types, want     []PolicyType
	}{
		{"no rules", nil, nil, nil, []PolicyType{"Ingress"}},
		{"ingress only", []Rule{allow}, nil, nil, []PolicyType{"Ingress"}},
		{"egress only", nil, []Rule{allow}, nil, []PolicyType{"Egress"}},
		{"both", []Rule{allow}, []Rule{allow}, nil, []PolicyType{"Ingress", "Egress"}},
		{"explicit kept", []Rule{allow}, nil, []PolicyType{"Egress"}, []PolicyType{"Egress"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			np := &NetworkPolicy{Spec: NetworkPolicySpec{Ingress: tc.ingress, Egress: tc.egress, Types: tc.types}}
			np.Default()
			if !reflect.DeepEqual(np.Spec.Types, tc.want) || np.Spec.Tier != "default" {
				t.Errorf("NetworkPolicy: types %v tier %q; want %v, default", np.Spec.Types, np.Spec.Tier, tc.want)
			}
			gnp := &GlobalNetworkPolicy{Spec: GlobalNetworkPolicySpec{Ingress: tc.ingress, Egress: tc.egress, Types: tc.types}}
			gnp.Default()
			if !reflect.DeepEqual(gnp.Spec.Types, tc.want) || gnp.Spec.Tier != "default" {
				t.Errorf("GlobalNetworkPolicy: types %v tier %q; want %v, default", gnp.Spec.Types, gnp.Spec.Tier, tc.want)
			}
		})
	}
	np := &NetworkPolicy{Spec: NetworkPolicySpec{Tier: "security"}}
	np.Default()
	if np.Spec.Tier != "security" {
		t.Errorf("tier overwritten: %q", np.Spec.Tier)
	}
}

// Calico v3.32.1's calicoctl labels every tiered policy it writes with its
// tier (recorded: `projectcalico.org/tier: security` beside the user's
// labels, `default` for a policy that names no tier), replacing a label the
// user gave.
func TestPolicyTierLabel(t *testing.T) {
	for _, r := range []struct {
		res  Resource
		want string
	}{
		{&NetworkPolicy{Metadata: ObjectMeta{Labels: map[string]string{"team": "platform", TierLabel: "forged"}}}, "default"},
		{&GlobalNetworkPolicy{Spec: GlobalNetworkPolicySpec{Tier: "security"}}, "security"},
		{&StagedNetworkPolicy{Spec: StagedNetworkPolicySpec{NetworkPolicySpec: NetworkPolicySpec{Tier: "security"}}}, "security"},
		{&StagedGlobalNetworkPolicy{}, "default"},
	} {
		r.res.Default()
		labels := r.res.GetObjectMeta().Labels
		if labels[TierLabel] != r.want {
			t.Errorf("%T: labels %v, want %s=%s", r.res, labels, TierLabel, r.want)
		}
	}
}

func TestWorkloadEndpointDefaultLabels(t *testing.T) {
	w := &WorkloadEndpoint{
		Metadata: ObjectMeta{Name: "n-cni-x-eth0", Namespace: "testns", Labels: map[string]string{"app": "web"}},
		Spec:     WorkloadEndpointSpec{Orchestrator: "k8s", ServiceAccountName: "default"},
	}
	w.Default()
	want := map[string]string{
		"app": "web", LabelNamespace: "testns", LabelOrchestrator: "k8s", LabelServiceAccount: "default",
	}
	if !reflect.DeepEqual(w.Metadata.Labels, want) {
		t.Errorf("labels %v, want %v", w.Metadata.Labels, want)
	}
}

func TestTierDefaults(t *testing.T) {
	tr := &Tier{Metadata: ObjectMeta{Name: "default"}}
	tr.Default()
	if tr.Spec.DefaultAction != ActionDeny || tr.Spec.Order == nil || *tr.Spec.Order != 1e6 {
		t.Errorf("default tier: %+v", tr.Spec)
	}
	if err := tr.Validate(); err != nil {
		t.Errorf("defaulted default tier invalid: %v", err)
	}
	other := &Tier{Metadata: ObjectMeta{Name: "security"}}
	other.Default()
	if other.Spec.Order != nil || other.Spec.DefaultAction != ActionDeny {
		t.Errorf("security tier: %+v", other.Spec)
	}
}

func TestPoolOverlap(t *testing.T) {
	pool := func(name, cidr string) *IPPool {
		return &IPPool{Metadata: ObjectMeta{Name: name}, Spec: IPPoolSpec{CIDR: cidr}}
	}
	a := pool("a", "10.0.0.0/16")
	for _, tc := range []struct {
		b    *IPPool
		want bool
	}{
		{pool("b", "10.0.128.0/24"), true},
		{pool("b", "10.0.0.0/8"), true},
		{pool("b", "10.1.0.0/16"), false},
		{pool("b", "fd00::/48"), false},
		{pool("b", "not-a-cidr"), false},
	} {
		if got := PoolsOverlap(a, tc.b); got != tc.want {
			t.Errorf("PoolsOverlap(%s, %s) = %v", a.Spec.CIDR, tc.b.Spec.CIDR, got)
		}
	}

	existing := []*IPPool{pool("a", "10.0.0.0/16"), pool("b", "10.1.0.0/16"), pool("c", "10.2.0.0/16")}
	// Updating a pool in place is not an overlap with itself.
	if err := CheckPoolOverlap(pool("a", "10.0.0.0/17"), existing); err != nil {
		t.Errorf("update of a: %v", err)
	}
	if err := CheckPoolOverlap(pool("d", "10.3.0.0/16"), existing); err != nil {
		t.Errorf("disjoint pool: %v", err)
	}
	err := CheckPoolOverlap(pool("d", "10.0.0.0/15"), existing)
	if err == nil {
		t.Fatal("10.0.0.0/15 overlaps a and b but no error")
	}
	for _, s := range []string{`"d"`, "10.0.0.0/15", `"a"`, "10.0.0.0/16", `"b"`, "10.1.0.0/16", "spec.cidr"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not mention %s", err, s)
		}
	}
	if strings.Contains(err.Error(), `"c"`) {
		t.Errorf("error names non-overlapping pool c: %v", err)
	}
}

// Calico v3.32.1's calicoctl stores these in every FelixConfiguration it
// writes (recorded in Kubernetes datastore mode); the eBPF ones are accepted
// only at those values, since this agent has no eBPF dataplane.
func TestFelixConfigurationDefaults(t *testing.T) {
	f := &FelixConfiguration{TypeMeta: TypeMeta{Kind: "FelixConfiguration", APIVersion: APIVersion}, Metadata: ObjectMeta{Name: "default"}}
	f.Default()
	b, err := Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"bpfConnectTimeLoadBalancing":"TCP"`, `"bpfHostNetworkedNATWithoutCTLB":"Enabled"`, `"bpfLogLevel":""`, `"floatingIPs":"Disabled"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("defaulted FelixConfiguration %s lacks %s", b, want)
		}
	}
	if err := f.Validate(); err != nil {
		t.Errorf("the defaults are refused: %v", err)
	}
	info := "Info"
	f.Spec.BPFLogLevel = &info
	if err := f.Validate(); err == nil || !strings.Contains(err.Error(), "spec.bpfLogLevel") {
		t.Errorf("bpfLogLevel Info accepted: %v", err)
	}
	f.Spec.BPFLogLevel, f.Spec.BPFConnectTimeLoadBalancing = nil, "Disabled"
	if err := f.Validate(); err == nil || !strings.Contains(err.Error(), "spec.bpfConnectTimeLoadBalancing") {
		t.Errorf("bpfConnectTimeLoadBalancing Disabled accepted: %v", err)
	}
}
