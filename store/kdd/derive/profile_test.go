package derive_test

import (
	"testing"

	"github.com/calico-aio/calico-aio/store/kdd"
	"github.com/calico-aio/calico-aio/store/kdd/derive"
)

// allowRules are allow-all ingress and egress as the model stores them.
const allowRules = `"ingress":[{"action":"Allow","source":{},"destination":{}}],"egress":[{"action":"Allow","source":{},"destination":{}}]`

// TestRecordedProfiles: the recorded ServiceAccount, and namespace shop as
// kubectl made it, derive the profiles calicoctl showed (uid, revision,
// labelsToApply).
func TestRecordedProfiles(t *testing.T) {
	r, err := derive.ServiceAccountProfile(recordedObject(t, "ServiceAccount/shop/web-sa", "3a-before-cni"))
	want := `{"kind":"Profile","apiVersion":"projectcalico.org/v3","metadata":{"name":"ksa.shop.web-sa",` +
		`"uid":"e45c0664-d237-484c-a168-9f2b9f42d135","creationTimestamp":"2026-11-27T16:45:47Z"},` +
		`"spec":{"labelsToApply":{"pcsa.projectcalico.org/name":"web-sa","pcsa.tier":"frontend"}}}`
	if err != nil || !sameJSON(t, r.Model, []byte(want)) || r.ResourceVersion != "/182" {
		t.Errorf("ksa: %s (rv %q), %v\nwant %s", r.Model, r.ResourceVersion, err, want)
	}
	// Namespace shop is not in objects.json: its uid is the one whose
	// reversal calicoctl showed.
	nsUID, _ := kdd.ReverseUID("5c0cfec5-3554-490f-87b3-27f5db915015")
	ns := `{"kind":"Namespace","apiVersion":"v1","metadata":{"name":"shop","uid":"` + nsUID + `","resourceVersion":"149",` +
		`"creationTimestamp":"2026-11-27T16:44:50Z","labels":{"kubernetes.io/metadata.name":"shop","team":"red"}}}`
	r, err = derive.NamespaceProfile([]byte(ns))
	want = `{"kind":"Profile","apiVersion":"projectcalico.org/v3","metadata":{"name":"kns.shop",` +
		`"uid":"5c0cfec5-3554-490f-87b3-27f5db915015","creationTimestamp":"2026-11-27T16:44:50Z"},"spec":{` + allowRules +
		`,"labelsToApply":{"pcns.kubernetes.io/metadata.name":"shop","pcns.projectcalico.org/name":"shop","pcns.team":"red"}}}`
	if err != nil || !sameJSON(t, r.Model, []byte(want)) || r.ResourceVersion != "149/" {
		t.Errorf("kns: %s (rv %q), %v\nwant %s", r.Model, r.ResourceVersion, err, want)
	}
	r, err = derive.DefaultAllow()
	want = `{"kind":"Profile","apiVersion":"projectcalico.org/v3","metadata":{"name":"projectcalico-default-allow"},"spec":{` + allowRules + `}}`
	if err != nil || !sameJSON(t, r.Model, []byte(want)) || r.ResourceVersion != "1" {
		t.Errorf("default allow: %s (rv %q), %v", r.Model, r.ResourceVersion, err)
	}
}
