package api

import (
	"maps"
	"strings"
	"testing"
)

// enforcedBGP are the BGP fields honoured since issue #22 (kept apart from
// the enforced table so branches merge cleanly).
var enforcedBGP = map[string]string{
	"BGPConfiguration.spec.logSeverityScreen":       "TestBGPLogSeverityLive",
	"BGPPeer.spec.localASNumber":                    "TestDesiredPeersLocalASNumber",
	"BGPPeer.spec.reversePeering":                   "TestDesiredPeersReversePeeringManual",
	"BGPConfiguration.spec.ipv4NormalRoutePriority": "TestBGPRoutePriority",
	"BGPConfiguration.spec.ipv6NormalRoutePriority": "TestBGPRoutePriority",
}

func init() { maps.Copy(enforced, enforcedBGP) }

// A node.<name> BGPConfiguration refuses what Calico allows only on
// "default", with Calico's reasons; the per-node fields pass.
func TestBGPConfigurationNodeSpecific(t *testing.T) {
	for _, tc := range []struct {
		name, spec string
		want       []string // fields refused; none: valid
	}{
		{"node.n1", `{"listenPort":1790,"logSeverityScreen":"Debug"}`, nil},
		{"default", `{"nodeToNodeMeshEnabled":false,"asNumber":64600,"listenPort":1790}`, nil},
		{"node.n1", `{"nodeToNodeMeshEnabled":true}`, []string{"spec.nodeToNodeMeshEnabled: Cannot set nodeToNodeMeshEnabled on a non default BGP Configuration."}},
		{"node.n1", `{"asNumber":64600}`, []string{"spec.asNumber: Cannot set ASNumber on a non default BGP Configuration."}},
		{"node.n1", `{"nodeToNodeMeshEnabled":false,"asNumber":64600,"listenPort":1790}`, []string{"spec.nodeToNodeMeshEnabled: ", "spec.asNumber: "}},
	} {
		r, err := Decode([]byte(`{"kind":"BGPConfiguration","metadata":{"name":"` + tc.name + `"},"spec":` + tc.spec + `}`))
		if err != nil {
			t.Fatal(err)
		}
		err = r.Validate()
		if len(tc.want) == 0 && err != nil {
			t.Errorf("%s %s: %v", tc.name, tc.spec, err)
		}
		for _, w := range tc.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%s %s: got %v, want %q", tc.name, tc.spec, err, w)
			}
		}
	}
}

// localASNumber and reversePeering are checked; route priorities are
// checked against Calico's range; serviceLoadBalancerAggregation passes
// either way (no load balancer IPs are advertised).
func TestBGPFieldsOfIssue22(t *testing.T) {
	for _, tc := range []struct {
		doc  string
		want string // "" valid
	}{
		{`{"kind":"BGPPeer","metadata":{"name":"p"},"spec":{"peerIP":"192.0.2.1","asNumber":64513,"localASNumber":64600,"reversePeering":"Manual"}}`, ""},
		{`{"kind":"BGPPeer","metadata":{"name":"p"},"spec":{"peerIP":"192.0.2.1","reversePeering":"Sometimes"}}`, "spec.reversePeering: "},
		{`{"kind":"BGPPeer","metadata":{"name":"p"},"spec":{"peerIP":"192.0.2.1","localASNumber":0}}`, "spec.localASNumber: "},
		{`{"kind":"BGPConfiguration","metadata":{"name":"default"},"spec":{"ipv4NormalRoutePriority":1024,"ipv6NormalRoutePriority":1024,"serviceLoadBalancerAggregation":"Disabled"}}`, ""},
		{`{"kind":"BGPConfiguration","metadata":{"name":"node.n1"},"spec":{"ipv4NormalRoutePriority":100,"ipv6NormalRoutePriority":2048}}`, ""},
		{`{"kind":"BGPConfiguration","metadata":{"name":"default"},"spec":{"ipv4NormalRoutePriority":0}}`, "spec.ipv4NormalRoutePriority: "},
		{`{"kind":"BGPConfiguration","metadata":{"name":"default"},"spec":{"ipv6NormalRoutePriority":2147483647}}`, "spec.ipv6NormalRoutePriority: "},
		{`{"kind":"BGPConfiguration","metadata":{"name":"default"},"spec":{"logSeverityScreen":"Debug"}}`, ""},
	} {
		checkValidate(t, tc.doc, tc.want)
	}
}

// checkValidate decodes doc and validates it: want "" is accepted, anything
// else is a refusal whose message contains want.
func checkValidate(t *testing.T, doc, want string) {
	t.Helper()
	r, err := Decode([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	err = r.Validate()
	switch {
	case want == "" && err != nil:
		t.Errorf("%s: %v", doc, err)
	case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
		t.Errorf("%s: got %v, want %q", doc, err, want)
	}
}
