package k8s

import (
	"strings"
	"testing"
)

// TestNetworkPolicyToCalico converts each NetworkPolicy of the conformance
// list, written as a user would apply it, and compares the Calico spec
// with what Calico's kube-controllers store for it.
func TestNetworkPolicyToCalico(t *testing.T) {
	const k8s = "projectcalico.org/orchestrator == 'k8s'"
	for _, tc := range []struct{ name, in, want string }{{
		name: "deny all ingress",
		in:   `{podSelector: {}, policyTypes: [Ingress]}`,
		want: `{tier: default, order: 1000, selector: "` + k8s + `", types: [Ingress]}`,
	}, {
		name: "no rules and no policyTypes denies ingress",
		in:   `{podSelector: {matchLabels: {app: web}}}`,
		want: `{tier: default, order: 1000, selector: "` + k8s + ` && app == 'web'", types: [Ingress]}`,
	}, {
		name: "no rules for either listed type denies both",
		in:   `{podSelector: {}, ingress: [], egress: [], policyTypes: [Ingress, Egress]}`,
		want: `{tier: default, order: 1000, selector: "` + k8s + `", types: [Ingress, Egress]}`,
	}, {
		name: "empty rule allows all ingress",
		in:   `{podSelector: {}, ingress: [{}]}`,
		want: `{tier: default, order: 1000, selector: "` + k8s + `", types: [Ingress],
		       ingress: [{action: Allow, source: {}, destination: {}}]}`,
	}, {
		name: "allow from a namespace",
		in: `{podSelector: {matchLabels: {app: db}},
		      ingress: [{from: [{namespaceSelector: {matchLabels: {team: blue}}}]}]}`,
		want: `{tier: default, order: 1000, selector: "` + k8s + ` && app == 'db'", types: [Ingress],
		       ingress: [{action: Allow, destination: {},
		                  source: {selector: "` + k8s + `", namespaceSelector: "team == 'blue'"}}]}`,
	}, {
		name: "allow from all namespaces",
		in:   `{podSelector: {}, ingress: [{from: [{namespaceSelector: {}}]}]}`,
		want: `{tier: default, order: 1000, selector: "` + k8s + `", types: [Ingress],
		       ingress: [{action: Allow, destination: {},
		                  source: {selector: "` + k8s + `", namespaceSelector: "all()"}}]}`,
	}, {
		name: "allow from pods of this namespace",
		in:   `{podSelector: {}, ingress: [{from: [{podSelector: {matchLabels: {role: fe}}}]}]}`,
		want: `{tier: default, order: 1000, selector: "` + k8s + `", types: [Ingress],
		       ingress: [{action: Allow, destination: {}, source: {selector: "` + k8s + ` && role == 'fe'"}}]}`,
	}, {
		name: "allow from pods in a namespace",
		in: `{podSelector: {}, ingress: [{from: [{
		        namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: prod}},
		        podSelector: {matchExpressions: [{key: tier, operator: In, values: [web, api]}]}}]}]}`,
		want: `{tier: default, order: 1000, selector: "` + k8s + `", types: [Ingress],
		       ingress: [{action: Allow, destination: {}, source: {
		         selector: "` + k8s + ` && tier in { 'web', 'api' }",
		         namespaceSelector: "kubernetes.io/metadata.name == 'prod'"}}]}`,
	}, {
		name: "ipBlock with except, host bits cleared",
		in: `{podSelector: {}, ingress: [{from: [
		        {ipBlock: {cidr: 172.17.0.0/16, except: [172.17.1.0/24, 172.17.2.9/24]}},
		        {ipBlock: {cidr: "fd00::1/64"}}]}]}`,
		want: `{tier: default, order: 1000, selector: "` + k8s + `", types: [Ingress],
		       ingress: [
		         {action: Allow, destination: {}, source: {nets: [172.17.0.0/16], notNets: [172.17.1.0/24, 172.17.2.0/24]}},
		         {action: Allow, destination: {}, source: {nets: ["fd00::/64"]}}]}`,
	}, {
		name: "ports only: from anywhere on those ports",
		in:   `{podSelector: {}, ingress: [{ports: [{port: 80}, {port: 443}]}]}`,
		want: `{tier: default, order: 1000, selector: "` + k8s + `", types: [Ingress],
		       ingress: [{action: Allow, protocol: TCP, source: {}, destination: {ports: [80, 443]}}]}`,
	}, {
		name: "egress to one port only",
		in: `{podSelector: {matchLabels: {app: api}}, policyTypes: [Egress],
		      egress: [{to: [{podSelector: {matchLabels: {app: db}}}], ports: [{protocol: TCP, port: 5432}]}]}`,
		want: `{tier: default, order: 1000, selector: "` + k8s + ` && app == 'api'", types: [Egress],
		       egress: [{action: Allow, protocol: TCP, source: {},
		                 destination: {selector: "` + k8s + ` && app == 'db'", ports: [5432]}}]}`,
	}, {
		name: "egress-only policy allowing all egress",
		in:   `{podSelector: {}, policyTypes: [Egress], egress: [{}]}`,
		want: `{tier: default, order: 1000, selector: "` + k8s + `", types: [Egress],
		       egress: [{action: Allow, source: {}, destination: {}}]}`,
	}, {
		name: "policyTypes default adds Egress when there are egress rules",
		in:   `{podSelector: {}, egress: [{ports: [{protocol: UDP, port: 53}]}]}`,
		want: `{tier: default, order: 1000, selector: "` + k8s + `", types: [Ingress, Egress],
		       egress: [{action: Allow, protocol: UDP, source: {}, destination: {ports: [53]}}]}`,
	}, {
		name: "unknown policyTypes fall back to Ingress",
		in:   `{podSelector: {}, policyTypes: [Sideways]}`,
		want: `{tier: default, order: 1000, selector: "` + k8s + `", types: [Ingress]}`,
	}, {
		name: "named ports, one rule per protocol",
		in:   `{podSelector: {}, ingress: [{ports: [{protocol: UDP, port: dns}, {port: http}, {port: "8080"}]}]}`,
		want: `{tier: default, order: 1000, selector: "` + k8s + `", types: [Ingress], ingress: [
		         {action: Allow, protocol: TCP, source: {}, destination: {ports: [http, 8080]}},
		         {action: Allow, protocol: UDP, source: {}, destination: {ports: [dns]}}]}`,
	}, {
		name: "endPort range",
		in:   `{podSelector: {}, ingress: [{ports: [{protocol: TCP, port: 32000, endPort: 32768}]}]}`,
		want: `{tier: default, order: 1000, selector: "` + k8s + `", types: [Ingress],
		       ingress: [{action: Allow, protocol: TCP, source: {}, destination: {ports: ["32000:32768"]}}]}`,
	}, {
		name: "ports merged into ranges after named ports",
		in: `{podSelector: {}, ingress: [{ports: [
		        {port: 82}, {port: 9090}, {port: web}, {port: 80}, {port: 81}, {port: 81, endPort: 85}, {port: 87}]}]}`,
		want: `{tier: default, order: 1000, selector: "` + k8s + `", types: [Ingress], ingress: [
		         {action: Allow, protocol: TCP, source: {}, destination: {ports: [web, "80:85", 87, 9090]}}]}`,
	}, {
		name: "a port entry without a port allows the whole protocol",
		in:   `{podSelector: {}, ingress: [{ports: [{port: 80}, {}, {protocol: SCTP}, {port: 443}]}]}`,
		want: `{tier: default, order: 1000, selector: "` + k8s + `", types: [Ingress], ingress: [
		         {action: Allow, protocol: SCTP, source: {}, destination: {}},
		         {action: Allow, protocol: TCP, source: {}, destination: {}}]}`,
	}, {
		name: "peers times protocols",
		in: `{podSelector: {}, egress: [{to: [{podSelector: {}}, {ipBlock: {cidr: 10.0.0.0/8}}],
		        ports: [{protocol: UDP, port: 53}, {protocol: TCP, port: 53}]}]}`,
		want: `{tier: default, order: 1000, selector: "` + k8s + `", types: [Ingress, Egress], egress: [
		         {action: Allow, protocol: TCP, source: {}, destination: {selector: "` + k8s + `", ports: [53]}},
		         {action: Allow, protocol: TCP, source: {}, destination: {nets: [10.0.0.0/8], ports: [53]}},
		         {action: Allow, protocol: UDP, source: {}, destination: {selector: "` + k8s + `", ports: [53]}},
		         {action: Allow, protocol: UDP, source: {}, destination: {nets: [10.0.0.0/8], ports: [53]}}]}`,
	}, {
		name: "several ingress rules keep their order",
		in: `{podSelector: {}, ingress: [
		        {from: [{podSelector: {matchLabels: {a: "1"}}}]},
		        {from: [{namespaceSelector: {matchExpressions: [{key: env, operator: NotIn, values: [dev]},
		                                                        {key: pci, operator: DoesNotExist}]}}]}]}`,
		want: `{tier: default, order: 1000, selector: "` + k8s + `", types: [Ingress], ingress: [
		         {action: Allow, destination: {}, source: {selector: "` + k8s + ` && a == '1'"}},
		         {action: Allow, destination: {}, source: {selector: "` + k8s + `",
		           namespaceSelector: "env not in { 'dev' } && ! has(pci)"}}]}`,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			np := decodeYAML[NetworkPolicy](t, "metadata: {name: p, namespace: ns1}\nspec: "+tc.in)
			got, err := NetworkPolicyToCalico(np)
			if err != nil {
				t.Fatalf("NetworkPolicyToCalico: %v", err)
			}
			assertJSON(t, got.Spec, tc.want)
			if got.Metadata.Name != "knp.default.p" || got.Metadata.Namespace != "ns1" {
				t.Errorf("metadata = %+v, want knp.default.p in ns1", got.Metadata)
			}
			assertValid(t, got)
		})
	}
}

// TestNetworkPolicyObject checks the whole stored object once.
func TestNetworkPolicyObject(t *testing.T) {
	np := decodeYAML[NetworkPolicy](t, `
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: allow-web, namespace: shop, uid: 3f1c, resourceVersion: "77", labels: {x: y}}
spec:
  podSelector: {matchLabels: {app: web}}
  ingress: [{ports: [{port: 8080}]}]`)
	got, err := NetworkPolicyToCalico(np)
	if err != nil {
		t.Fatal(err)
	}
	assertJSON(t, got, `
kind: NetworkPolicy
apiVersion: projectcalico.org/v3
metadata: {name: knp.default.allow-web, namespace: shop}
spec:
  tier: default
  order: 1000
  selector: projectcalico.org/orchestrator == 'k8s' && app == 'web'
  types: [Ingress]
  ingress:
  - action: Allow
    protocol: TCP
    source: {}
    destination: {ports: [8080]}`)
}

// TestNetworkPolicyBadRules: a rule that cannot be converted is left out
// and reported; the rest of the policy still applies (fail closed).
func TestNetworkPolicyBadRules(t *testing.T) {
	for _, tc := range []struct{ name, bad, wantErr string }{
		{"bad cidr", `{from: [{ipBlock: {cidr: 10.0.0.300/8}}]}`, "spec.ingress[0]: peer 0: ipBlock.cidr"},
		{"cidr without length", `{from: [{ipBlock: {cidr: 10.0.0.1}}]}`, "ipBlock.cidr"},
		{"except outside cidr", `{from: [{ipBlock: {cidr: 10.0.0.0/16, except: [10.1.0.0/24]}}]}`, "not inside cidr"},
		{"except wider than cidr", `{from: [{ipBlock: {cidr: 10.0.0.0/16, except: [10.0.0.0/8]}}]}`, "not inside cidr"},
		{"except other family", `{from: [{ipBlock: {cidr: 10.0.0.0/16, except: ["::/64"]}}]}`, "not inside cidr"},
		{"ipBlock with selector", `{from: [{ipBlock: {cidr: 10.0.0.0/8}, podSelector: {}}]}`, "cannot be combined"},
		{"port zero", `{ports: [{port: 0}]}`, "ports[0]: invalid port"},
		{"port too big", `{ports: [{port: 70000}]}`, "ports[0]: invalid port"},
		{"endPort below port", `{ports: [{port: 90, endPort: 80}]}`, "minimum is above its maximum"},
		{"named port range", `{ports: [{port: http, endPort: 90}]}`, "invalid port"},
		{"bad port name", `{ports: [{port: "no_underscores"}]}`, "invalid port"},
		{"bad protocol", `{ports: [{protocol: ICMP, port: 1}]}`, `protocol "ICMP"`},
		{"bad selector operator", `{from: [{podSelector: {matchExpressions: [{key: a, operator: Gt, values: ["1"]}]}}]}`, "unknown operator"},
		{"bad namespace selector", `{from: [{namespaceSelector: {matchExpressions: [{key: a, operator: In}]}}]}`, "namespaceSelector"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			np := decodeYAML[NetworkPolicy](t, "metadata: {name: p, namespace: ns1}\nspec: {podSelector: {}, ingress: ["+
				tc.bad+", {from: [{podSelector: {}}]}], egress: [{ports: [{port: 1}]}]}")
			got, err := NetworkPolicyToCalico(np)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "ns1/p") {
				t.Fatalf("error = %v, want one containing %q and the policy's name", err, tc.wantErr)
			}
			if got == nil {
				t.Fatal("policy is nil; want it without the bad rule")
			}
			assertJSON(t, got.Spec, `{tier: default, order: 1000, selector: "projectcalico.org/orchestrator == 'k8s'",
			  types: [Ingress, Egress],
			  ingress: [{action: Allow, destination: {}, source: {selector: "projectcalico.org/orchestrator == 'k8s'"}}],
			  egress: [{action: Allow, protocol: TCP, source: {}, destination: {ports: [1]}}]}`)
			assertValid(t, got)
		})
	}
}

// TestNetworkPolicyBadPodSelector: without a selector nothing is safe to
// store.
func TestNetworkPolicyBadPodSelector(t *testing.T) {
	np := decodeYAML[NetworkPolicy](t, `{metadata: {name: p, namespace: ns1},
	  spec: {podSelector: {matchExpressions: [{key: "bad key", operator: Exists}]}}}`)
	got, err := NetworkPolicyToCalico(np)
	if err == nil || got != nil || !strings.Contains(err.Error(), "spec.podSelector") {
		t.Fatalf("got %v, %v; want nil and a spec.podSelector error", got, err)
	}
}
