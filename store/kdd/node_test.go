package kdd_test

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/calico-aio/calico-aio/store/kdd"
)

// TestRecordedNodes: the recorded Kubernetes Node derives the Calico Node
// calicoctl showed, before and after calicoctl's node patch and label; the
// annotations that write put on the Kubernetes Node are the recorded ones.
func TestRecordedNodes(t *testing.T) {
	recs := recordedObjects(t, "Node/node1")
	const meta = `"name":"node1","uid":"c1664823-7e54-4f8c-aad2-1fdfd4c24d25","creationTimestamp":"2026-11-27T16:45:47Z",`
	const kube = `"annotations":{"projectcalico.org/kube-labels":"{\"kubernetes.io/hostname\":\"node1\",\"kubernetes.io/os\":\"linux\",\"rack\":\"r1\"}"}`
	const orch = `"orchRefs":[{"nodeName":"node1","orchestrator":"k8s"}]`
	want := []string{
		`{"kind":"Node","apiVersion":"projectcalico.org/v3","metadata":{` + meta +
			`"labels":{"kubernetes.io/hostname":"node1","kubernetes.io/os":"linux","rack":"r1"},` + kube + `},` +
			`"spec":{` + orch + `,"addresses":[{"address":"192.0.2.1","type":"InternalIP"}]},"status":{}}`,
		`{"kind":"Node","apiVersion":"projectcalico.org/v3","metadata":{` + meta +
			`"labels":{"calico-role":"edge","kubernetes.io/hostname":"node1","kubernetes.io/os":"linux","rack":"r1"},` + kube + `},` +
			`"spec":{"bgp":{"asNumber":64600,"ipv4Address":"192.0.2.1/24"},` + orch +
			`,"addresses":[{"address":"192.0.2.1/24","type":"CalicoNodeIP"},{"address":"192.0.2.1","type":"InternalIP"}]},"status":{}}`,
	}
	if len(recs) != len(want) {
		t.Fatalf("%d recorded node versions", len(recs))
	}
	for i, rec := range recs {
		r, err := kdd.NodeFromK8s(rec.Object)
		if err != nil {
			t.Fatal(err)
		}
		if !sameJSON(t, r.Model, []byte(want[i])) || r.UID != "c1664823-7e54-4f8c-aad2-1fdfd4c24d25" {
			t.Errorf("%s@%s:\n got %s\nwant %s", rec.Key, rec.Step, r.Model, want[i])
		}
	}
	got, err := kdd.NodeAnnotations([]byte(want[1]))
	wantAnn := map[string]string{
		"projectcalico.org/ASNumber": "64600", "projectcalico.org/IPv4Address": "192.0.2.1/24",
		"projectcalico.org/labels": `{"calico-role":"edge"}`,
	}
	if err != nil || !maps.Equal(got, wantAnn) {
		t.Errorf("NodeAnnotations = %v, %v; want %v", got, err, wantAnn)
	}
	for k := range got {
		if !slices.Contains(kdd.NodeAnnotationKeys(), k) {
			t.Errorf("%s not in NodeAnnotationKeys", k)
		}
	}
}

// TestNodeAnnotationsRoundTrip: every annotated field reads back.
func TestNodeAnnotationsRoundTrip(t *testing.T) {
	model := `{"kind":"Node","apiVersion":"projectcalico.org/v3","metadata":{"name":"n","uid":"c1664823-7e54-4f8c-aad2-1fdfd4c24d25",` +
		`"annotations":{"projectcalico.org/kube-labels":"{}"}},"spec":{"bgp":{"asNumber":65001,"ipv4Address":"192.0.2.9/24",` +
		`"ipv6Address":"fd00::9/64","ipv4IPIPTunnelAddr":"10.0.0.1","routeReflectorClusterID":"224.0.0.1"},` +
		`"ipv4VXLANTunnelAddr":"10.0.0.2","vxlanTunnelMACAddr":"66:00:00:00:00:01","ipv6VXLANTunnelAddr":"fd00::2",` +
		`"vxlanTunnelMACAddrV6":"66:00:00:00:00:02","wireguard":{"interfaceIPv4Address":"10.0.0.3","interfaceIPv6Address":"fd00::3"}},` +
		`"status":{"wireguardPublicKey":"a2V5MQ==","wireguardPublicKeyV6":"a2V5Mg=="}}`
	ann, err := kdd.NodeAnnotations([]byte(model))
	if err != nil || len(ann) != 13 {
		t.Fatalf("%v (%d), %v", ann, len(ann), err)
	}
	var b strings.Builder
	b.WriteString(`{"metadata":{"name":"n","uid":"c1664823-7e54-4f8c-aad2-1fdfd4c24d25","annotations":{`)
	first := true
	for k, v := range ann {
		if !first {
			b.WriteString(",")
		}
		first = false
		b.WriteString(`"` + k + `":"` + strings.ReplaceAll(v, `"`, `\"`) + `"`)
	}
	b.WriteString(`}}}`)
	r, err := kdd.NodeFromK8s([]byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	back, err := kdd.NodeAnnotations(r.Model)
	if err != nil || !maps.Equal(back, ann) {
		t.Errorf("read back %v, %v; want %v", back, err, ann)
	}
	if _, err := kdd.NodeAnnotations([]byte(`{"kind":"Node","metadata":{"name":"n"},"spec":{"interfaces":[{"name":"eth0"}]}}`)); err == nil || !strings.Contains(err.Error(), "spec.interfaces") {
		t.Errorf("interfaces: %v", err)
	}
}
