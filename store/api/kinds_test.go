package api

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestLookupKindAliases(t *testing.T) {
	want := map[string][]string{
		"IPPool":                        {"ippool", "ippools", "pool", "pools", "IPPool", "IPPOOLS"},
		"Node":                          {"node", "nodes", "no"},
		"WorkloadEndpoint":              {"workloadendpoint", "workloadendpoints", "wep", "weps", "WorkloadEndpoint"},
		"HostEndpoint":                  {"hostendpoint", "hostendpoints", "hep", "heps"},
		"Profile":                       {"profile", "profiles", "pro", "pros"},
		"NetworkPolicy":                 {"networkpolicy", "networkpolicies", "policy", "policies", "netpol", "np"},
		"GlobalNetworkPolicy":           {"globalnetworkpolicy", "globalnetworkpolicies", "gnp", "gnps"},
		"NetworkSet":                    {"networkset", "networksets", "netset", "netsets"},
		"GlobalNetworkSet":              {"globalnetworkset", "globalnetworksets", "gns"},
		"BGPPeer":                       {"bgppeer", "bgppeers", "bgpp", "bgpps", "BGPPeer"},
		"BGPConfiguration":              {"bgpconfiguration", "bgpconfigurations", "bgpconfig", "bgpconfigs"},
		"FelixConfiguration":            {"felixconfiguration", "felixconfigurations", "felixconfig", "felixconfigs"},
		"ClusterInformation":            {"clusterinformation", "clusterinformations", "clusterinfo"},
		"Tier":                          {"tier", "tiers"},
		"StagedNetworkPolicy":           {"stagednetworkpolicy", "stagednetworkpolicies", "snp"},
		"StagedGlobalNetworkPolicy":     {"stagedglobalnetworkpolicy", "stagedglobalnetworkpolicies", "sgnp"},
		"StagedKubernetesNetworkPolicy": {"stagedkubernetesnetworkpolicy", "stagedkubernetesnetworkpolicies", "sknp"},
	}
	for kind, names := range want {
		for _, n := range names {
			k, ok := LookupKind(n)
			if !ok || k.Kind != kind {
				t.Errorf("LookupKind(%q) = %q, %v; want %s", n, k.Kind, ok, kind)
			}
		}
	}
	if _, ok := LookupKind("pod"); ok {
		t.Error("LookupKind(pod) found a kind")
	}
	if got := len(Kinds()); got != len(want) {
		t.Errorf("%d kinds registered, want %d", got, len(want))
	}
	// No name may lead to two kinds.
	owner := map[string]string{}
	for _, k := range Kinds() {
		for _, n := range append([]string{strings.ToLower(k.Kind), k.Plural}, k.Aliases...) {
			if o, dup := owner[n]; dup && o != k.Kind {
				t.Errorf("name %q used by %s and %s", n, o, k.Kind)
			}
			owner[n] = k.Kind
			if n != strings.ToLower(n) {
				t.Errorf("%s alias %q is not lower case", k.Kind, n)
			}
		}
	}
	for _, k := range Kinds() {
		if ns := k.Kind == "WorkloadEndpoint" || k.Kind == "NetworkPolicy" || k.Kind == "NetworkSet" ||
			k.Kind == "StagedNetworkPolicy" || k.Kind == "StagedKubernetesNetworkPolicy"; ns != k.Namespaced {
			t.Errorf("%s: Namespaced = %v", k.Kind, k.Namespaced)
		}
	}
}

// Every kind's empty object encodes with top-level kind, apiVersion,
// metadata and spec, and decodes back to the same kind.
func TestKindsEncodeShape(t *testing.T) {
	for _, k := range Kinds() {
		r := k.NewObject()
		r.GetObjectMeta().Name = "x"
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatalf("%s: %v", k.Kind, err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		if m["kind"] != k.Kind || m["apiVersion"] != APIVersion || m["metadata"] == nil || m["spec"] == nil {
			t.Errorf("%s encodes as %s", k.Kind, b)
		}
		if _, hasStatus := m["status"]; hasStatus != (k.Kind == "Node" || k.Kind == "Tier") {
			t.Errorf("%s: status present = %v: %s", k.Kind, hasStatus, b)
		}
		back, err := Decode(b)
		if err != nil || back.GetTypeMeta().Kind != k.Kind {
			t.Errorf("%s: Decode gave %v, %v", k.Kind, back, err)
		}
	}
}

func TestDecodeErrors(t *testing.T) {
	for in, want := range map[string]string{
		`{"apiVersion":"projectcalico.org/v3"}`:              "no kind",
		`{"kind":"Pod","apiVersion":"projectcalico.org/v3"}`: "unknown kind",
		`{"kind":"IPPool","apiVersion":"v1"}`:                "unsupported apiVersion",
		`{"kind":"IPPool","spec":{"blockSize":"big"}}`:       "decoding IPPool",
		`not json`: "decoding resource",
	} {
		if _, err := Decode([]byte(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Decode(%s) = %v; want error containing %q", in, err, want)
		}
	}
}
