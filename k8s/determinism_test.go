package k8s

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"

	"github.com/calico-aio/calico-aio/store/selector"
)

// randomPolicy draws a NetworkPolicy from a small vocabulary, valid except
// for an occasional bad port or CIDR.
func randomPolicy(r *rand.Rand) NetworkPolicy {
	pick := func(xs ...string) string { return xs[r.IntN(len(xs))] }
	sel := func() *LabelSelector {
		if r.IntN(3) == 0 {
			return nil
		}
		s := &LabelSelector{MatchLabels: map[string]string{}}
		for range r.IntN(4) {
			s.MatchLabels[pick("app", "tier", "team", "x.io/y", "z")] = pick("a", "b", "c")
		}
		if r.IntN(2) == 0 {
			s.MatchExpressions = append(s.MatchExpressions, LabelSelectorRequirement{
				Key: pick("env", "pci"), Operator: pick(OpIn, OpNotIn), Values: []string{pick("p", "q"), "r"}})
		}
		return s
	}
	peers := func() []NetworkPolicyPeer {
		var ps []NetworkPolicyPeer
		for range r.IntN(3) {
			if r.IntN(3) == 0 {
				ps = append(ps, NetworkPolicyPeer{IPBlock: &IPBlock{
					CIDR: pick("10.0.0.0/8", "10.1.2.3/16", "fd00::/48", "300.0.0.0/8"), Except: []string{}}})
				continue
			}
			ps = append(ps, NetworkPolicyPeer{PodSelector: sel(), NamespaceSelector: sel()})
		}
		return ps
	}
	ports := func() []NetworkPolicyPort {
		var ps []NetworkPolicyPort
		for range r.IntN(5) {
			p := NetworkPolicyPort{}
			if r.IntN(2) == 0 {
				p.Protocol = ptr(pick("TCP", "UDP", "SCTP"))
			}
			switch r.IntN(5) {
			case 0:
			case 1:
				p.Port = ptr(FromString(pick("http", "dns", "metrics")))
			case 2:
				p.Port, p.EndPort = ptr(FromInt(int32(1000+r.IntN(20)))), ptr(int32(1010+r.IntN(20)))
			default:
				p.Port = ptr(FromInt(int32(r.IntN(70000))))
			}
			ps = append(ps, p)
		}
		return ps
	}
	np := NetworkPolicy{Metadata: ObjectMeta{Name: "p", Namespace: "ns"}}
	if s := sel(); s != nil {
		np.Spec.PodSelector = *s
	}
	for range r.IntN(3) {
		np.Spec.Ingress = append(np.Spec.Ingress, NetworkPolicyIngressRule{From: peers(), Ports: ports()})
	}
	for range r.IntN(3) {
		np.Spec.Egress = append(np.Spec.Egress, NetworkPolicyEgressRule{To: peers(), Ports: ports()})
	}
	for _, t := range []string{"Ingress", "Egress"} {
		if r.IntN(3) == 0 {
			np.Spec.PolicyTypes = append(np.Spec.PolicyTypes, t)
		}
	}
	return np
}

// TestNetworkPolicyDeterministic converts random policies repeatedly (map
// iteration order differs each time) and after a JSON round trip of the
// input: the stored bytes must never change, every result must validate,
// and every selector must parse.
func TestNetworkPolicyDeterministic(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	withErr, withRules := 0, 0
	for i := range 500 {
		np := randomPolicy(r)
		first, firstErr := NetworkPolicyToCalico(np)
		if first == nil {
			t.Fatalf("policy %d: nil result: %v", i, firstErr)
		}
		want, _ := json.Marshal(first)

		raw, _ := json.Marshal(np)
		var again NetworkPolicy
		if err := json.Unmarshal(raw, &again); err != nil {
			t.Fatalf("policy %d: round trip: %v", i, err)
		}
		for j := range 5 {
			in := np
			if j%2 == 1 {
				in = again
			}
			got, err := NetworkPolicyToCalico(in)
			b, _ := json.Marshal(got)
			if !bytes.Equal(b, want) || (err == nil) != (firstErr == nil) ||
				(err != nil && err.Error() != firstErr.Error()) {
				t.Fatalf("policy %d run %d differs:\n%s\n%v\nvs\n%s\n%v", i, j, b, err, want, firstErr)
			}
		}
		if firstErr != nil {
			withErr++
		}
		if len(first.Spec.Ingress)+len(first.Spec.Egress) > 0 {
			withRules++
		}
		if _, err := selector.Parse(first.Spec.Selector); err != nil {
			t.Fatalf("policy %d: %v", i, err)
		}
		for _, rule := range append(first.Spec.Ingress, first.Spec.Egress...) {
			for _, s := range []string{rule.Source.Selector, rule.Source.NamespaceSelector,
				rule.Destination.Selector, rule.Destination.NamespaceSelector} {
				if _, err := selector.Parse(s); err != nil {
					t.Fatalf("policy %d: %v", i, err)
				}
			}
		}
		assertValid(t, first)
	}
	t.Logf("%d of 500 policies had dropped rules, %d had rules", withErr, withRules)
	if withErr == 0 || withErr > 400 || withRules < 200 {
		t.Errorf("%d of 500 policies had dropped rules and %d had rules; the generator is off", withErr, withRules)
	}
}

func TestIntOrStringJSON(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want IntOrString
	}{
		{`80`, FromInt(80)}, {` "http" `, FromString("http")}, {`"80"`, FromString("80")},
	} {
		var v IntOrString
		if err := json.Unmarshal([]byte(tc.in), &v); err != nil || v != tc.want {
			t.Errorf("%s: got %+v, %v; want %+v", tc.in, v, err, tc.want)
		}
		out, _ := json.Marshal(v)
		var back IntOrString
		if err := json.Unmarshal(out, &back); err != nil || back != v {
			t.Errorf("%s: round trip via %s gave %+v, %v", tc.in, out, back, err)
		}
	}
	for _, bad := range []string{`true`, `1.5`, `{}`, `99999999999`} {
		var v IntOrString
		if err := json.Unmarshal([]byte(bad), &v); err == nil {
			t.Errorf("%s: accepted as %+v", bad, v)
		}
	}
}

// TestDecodePodJSON reads a pod as the API server sends it: unknown fields
// are ignored and the deletion timestamp is RFC 3339.
func TestDecodePodJSON(t *testing.T) {
	var pod Pod
	err := json.Unmarshal([]byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a","namespace":"n",
	  "uid":"u-1","deletionTimestamp":"2025-03-01T10:00:00Z","ownerReferences":[{"kind":"ReplicaSet"}]},
	  "spec":{"nodeName":"node-1","serviceAccountName":"sa","containers":[{"name":"c","image":"x",
	  "ports":[{"name":"http","containerPort":80,"protocol":"TCP"}]}]},
	  "status":{"phase":"Running","podIP":"10.0.0.5","podIPs":[{"ip":"10.0.0.5"}]}}`), &pod)
	if err != nil {
		t.Fatal(err)
	}
	if pod.Metadata.DeletionTimestamp == nil || pod.Metadata.DeletionTimestamp.Unix() != 1740823200 ||
		pod.Spec.NodeName != "node-1" || pod.Spec.Containers[0].Ports[0].ContainerPort != 80 ||
		pod.Status.Phase != "Running" || PodIPs(pod)[0] != "10.0.0.5" || pod.Kind != "Pod" {
		t.Errorf("decoded %+v", pod)
	}
}
