package metrics

import (
	"bytes"
	"log/slog"
	"reflect"
	"strings"
	"testing"

	"github.com/calico-aio/calico-aio/felix/calc"
	"github.com/calico-aio/calico-aio/store/api"
	"github.com/prometheus/client_golang/prometheus"
)

func decodeOrFail(t *testing.T, doc string) api.Resource {
	t.Helper()
	r, err := api.Decode([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// A resource another tool stored with unsupported fields is logged once
// (again when its fields change), counted while it carries them, and
// uncounted when fixed or deleted.
func TestUnsupportedFieldsLoggedOnceAndCounted(t *testing.T) {
	var logs bytes.Buffer
	tr := newUnsupportedTracker()
	tr.log = slog.New(slog.NewTextHandler(&logs, nil))
	key := "/calico/resources/v3/projectcalico.org/ippools/p"
	bad := decodeOrFail(t, `{"kind":"IPPool","metadata":{"name":"p"},"spec":{"cidr":"10.9.0.0/16","disableBGPExport":true}}`)
	worse := decodeOrFail(t, `{"kind":"IPPool","metadata":{"name":"p"},"spec":{"cidr":"10.9.0.0/16","disableBGPExport":true,"namespaceSelector":"all()"}}`)
	good := decodeOrFail(t, `{"kind":"IPPool","metadata":{"name":"p"},"spec":{"cidr":"10.9.0.0/16"}}`)
	up := func(r api.Resource, deleted bool) {
		tr.observe(calc.Update{Kind: "ippools", Key: key, Resource: r, Deleted: deleted})
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(tr.gauge)
	count := func() float64 { return gaugeValue(t, reg, "IPPool") }
	warnings := func() int { return strings.Count(logs.String(), "does not honour") }

	up(bad, false)
	up(bad, false) // a resync or an unrelated change: no new log
	if warnings() != 1 || count() != 1 {
		t.Fatalf("after the same object twice: %d warnings, gauge %v; log:\n%s", warnings(), count(), logs.String())
	}
	if !strings.Contains(logs.String(), "spec.disableBGPExport") || !strings.Contains(logs.String(), "name=p") {
		t.Errorf("the warning names neither field nor resource:\n%s", logs.String())
	}
	up(worse, false)
	if warnings() != 2 || count() != 1 {
		t.Errorf("after the fields changed: %d warnings, gauge %v", warnings(), count())
	}
	up(good, false)
	if count() != 0 {
		t.Errorf("after the fields were removed: gauge %v", count())
	}
	up(bad, false)
	up(nil, true)
	if count() != 0 || warnings() != 3 {
		t.Errorf("after delete: gauge %v, %d warnings", count(), warnings())
	}
	// A staged policy is never enforced: nothing in it is unsupported.
	tr.observe(calc.Update{Kind: "stagedglobalnetworkpolicies", Key: key + "s",
		Resource: decodeOrFail(t, `{"kind":"StagedGlobalNetworkPolicy","metadata":{"name":"p"},"spec":{"serviceAccountSelector":"a == 'b'"}}`)})
	if gaugeValue(t, reg, "StagedGlobalNetworkPolicy") != 0 {
		t.Error("a staged policy was counted")
	}
}

// Staged policies reach the calculation as updates of their own plurals,
// which it does not dispatch: they are never enforced.
func TestStagedPoliciesNotEnforced(t *testing.T) {
	st := calc.NewState("node1")
	r := decodeOrFail(t, `{"kind":"StagedGlobalNetworkPolicy","metadata":{"name":"deny-all"},"spec":{"selector":"all()","ingress":[{"action":"Deny"}]}}`)
	st.Apply(calc.Update{Kind: "stagedglobalnetworkpolicies", Key: "/calico/resources/v3/projectcalico.org/stagedglobalnetworkpolicies/deny-all", Resource: r})
	st.Apply(calc.Update{InSync: true})
	empty := calc.NewState("node1")
	empty.Apply(calc.Update{InSync: true})
	if !reflect.DeepEqual(st.Desired(false), empty.Desired(false)) {
		t.Errorf("a staged policy changed the desired state")
	}
}

// gaugeValue reads calico_unsupported_fields_resources{kind} as served.
func gaugeValue(t *testing.T, reg *prometheus.Registry, kind string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "calico_unsupported_fields_resources" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "kind" && l.GetValue() == kind {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	return 0
}
