package ctl_test

import (
	"encoding/json"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/calico-aio/calico-aio/store/api"
	"github.com/calico-aio/calico-aio/store/storetest"
)

// handWritten is o as a user writes it in a file: only the fields our
// types model (the rest is what the user does not know about), with a
// label added, as YAML.
func handWritten(t *testing.T, o storetest.CalicoObject, label string) string {
	t.Helper()
	r, err := api.Decode([]byte(o.Value))
	if err != nil {
		t.Fatal(err)
	}
	m := r.GetObjectMeta()
	m.UID, m.CreationTimestamp = "", ""
	if m.Labels == nil {
		m.Labels = map[string]string{}
	}
	m.Labels["edited"] = label
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	y, err := yaml.JSONToYAML(b)
	if err != nil {
		t.Fatal(err)
	}
	return string(y)
}

// calicoctl apply and replace of files that do not mention the fields we
// do not model keep those fields as Calico stored them.
func TestApplyAndReplaceKeepUnmodelledFields(t *testing.T) {
	h := newHarness(t)
	objs := storetest.CalicoObjectsWithUnmodelledFields()
	for _, o := range objs {
		storetest.PutRaw(t, h.cli, o)
	}
	for _, verb := range []string{"apply", "replace"} {
		for _, o := range objs {
			h.mustRun(handWritten(t, o, verb), verb, "-f", "-")
			storetest.CheckUnmodelledKept(t, h.cli, o, "calicoctl "+verb)
			got, _ := storetest.JSONAt(storetest.StoredJSON(t, h.cli, o.Key), "metadata.labels.edited")
			if got != verb {
				t.Errorf("calicoctl %s %s: label edited = %v", verb, o.Key, got)
			}
		}
	}
}

// calicoctl get -o yaml and -o json show the fields we do not model, so
// get, edit, replace keeps them even when the user removes nothing.
func TestGetShowsUnmodelledFieldsAndRoundTrips(t *testing.T) {
	h := newHarness(t)
	objs := storetest.CalicoObjectsWithUnmodelledFields()
	for _, o := range objs {
		storetest.PutRaw(t, h.cli, o)
	}
	peer := objs[0]
	if !strings.HasSuffix(peer.Key, "bgppeers/peer-a") {
		t.Fatalf("fixture order changed: %s", peer.Key)
	}
	out := h.mustRun("", "get", "bgppeer", "peer-a", "-o", "yaml")
	for _, want := range []string{"localASNumber: 64600", "reversePeering: Manual", "generation: 2"} {
		if !strings.Contains(out, want) {
			t.Errorf("get -o yaml lacks %q:\n%s", want, out)
		}
	}
	js := h.mustRun("", "get", "bgppeers", "-o", "json")
	if !strings.Contains(js, `"localASNumber": 64600`) {
		t.Errorf("get -o json (list) lacks localASNumber:\n%s", js)
	}
	edited := strings.Replace(out, "asNumber: 64513", "asNumber: 64514", 1)
	if edited == out {
		t.Fatalf("no asNumber to edit in:\n%s", out)
	}
	h.mustRun(edited, "replace", "-f", "-")
	storetest.CheckUnmodelledKept(t, h.cli, peer, "get, edit, replace")
	if got, _ := storetest.JSONAt(storetest.StoredJSON(t, h.cli, peer.Key), "spec.asNumber"); got != 64514.0 {
		t.Errorf("edited asNumber = %v", got)
	}
}
