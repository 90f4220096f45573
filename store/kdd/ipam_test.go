package kdd_test

import (
	"encoding/json"
	"net/netip"
	"strings"
	"testing"

	"github.com/calico-aio/calico-aio/ipam"
	"github.com/calico-aio/calico-aio/store/kdd"
	"github.com/calico-aio/calico-aio/store/storetest/compat"
)

// ipamServerSet is what the API server sets on an IPAM custom resource;
// the uid too, as the etcd-shaped value does not carry one.
var ipamServerSet = append([]string{"uid"}, serverSet...)

// checkIPAMRoundTrip compares a custom resource written from a model with
// the recorded one: without the stored CR (a create) and as an update of it.
func checkIPAMRoundTrip(t *testing.T, rec recorded, write func(existing []byte) ([]byte, error)) {
	t.Helper()
	created, err := write(nil)
	if err != nil {
		t.Errorf("%s@%s: to CR: %v", rec.Key, rec.Step, err)
		return
	}
	if want := withoutServerFields(t, rec.Object, ipamServerSet...); !sameJSON(t, created, want) {
		t.Errorf("%s@%s: round trip\n got %s\nwant %s", rec.Key, rec.Step, created, want)
	}
	updated, err := write(rec.Object)
	if err != nil {
		t.Errorf("%s@%s: to CR (update): %v", rec.Key, rec.Step, err)
		return
	}
	if want := withoutServerFields(t, rec.Object, "generation", "managedFields", "creationTimestamp"); !sameJSON(t, updated, want) {
		t.Errorf("%s@%s: update\n got %s\nwant %s", rec.Key, rec.Step, updated, want)
	}
}

// sameThroughIPAMTypes: the model decodes into the ipam package's type
// and encodes back to the same value (64-bit numbers exact).
func sameThroughIPAMTypes[T any](t *testing.T, what string, model []byte) {
	t.Helper()
	var v T
	if err := json.Unmarshal(model, &v); err != nil {
		t.Errorf("%s: %v\n%s", what, err, model)
		return
	}
	again, _ := json.Marshal(v)
	if !sameJSON(t, again, model) {
		t.Errorf("%s: through the ipam types\n got %s\nwant %s", what, again, model)
	}
}

func TestRecordedIPAMBlocks(t *testing.T) {
	recs := recordedObjects(t, kdd.KindIPAMBlock)
	for _, rec := range recs {
		r, cidr, err := kdd.BlockFromCR(rec.Object)
		if err != nil || cidr != netip.MustParsePrefix("10.244.166.128/26") || r.Name != "10-244-166-128-26" {
			t.Fatalf("%s@%s: %v, %v, %v", rec.Key, rec.Step, r, cidr, err)
		}
		sameThroughIPAMTypes[ipam.Block](t, rec.Key+"@"+rec.Step, r.Model)
		checkIPAMRoundTrip(t, rec, func(ex []byte) ([]byte, error) { return kdd.BlockToCR(r.Model, ex) })
	}
	// The last version's 64-bit sequence numbers survive exactly.
	r, _, _ := kdd.BlockFromCR(recs[len(recs)-1].Object)
	if !strings.Contains(string(r.Model), `"sequenceNumber":1795797977554142197,`) {
		t.Errorf("sequenceNumber not exact: %s", r.Model)
	}
	if len(recs) != 5 {
		t.Errorf("%d block versions", len(recs))
	}
}

func TestRecordedBlockAffinity(t *testing.T) {
	for _, rec := range recordedObjects(t, kdd.KindBlockAffinity) {
		r, node, cidr, err := kdd.AffinityFromCR(rec.Object)
		if err != nil || node != "node1" || cidr.String() != "10.244.166.128/26" || string(r.Model) != `{"state":"confirmed","deleted":false}` {
			t.Fatalf("%s: %s %s %s %v", rec.Key, node, cidr, r.Model, err)
		}
		checkIPAMRoundTrip(t, rec, func(ex []byte) ([]byte, error) { return kdd.AffinityToCR(node, cidr, r.Model, ex) })
	}
	v6, err := kdd.AffinityToCR("node-a", netip.MustParsePrefix("fd00:10:244::40/122"), []byte(`{"state":"pending","deleted":true}`), nil)
	if err != nil || !strings.Contains(string(v6), `"projectcalico.org/ip-version":"6"`) || !strings.Contains(string(v6), `"deleted":"true"`) ||
		!strings.Contains(string(v6), `"name":"node-a-fd00-10-244--40-122"`) {
		t.Errorf("v6 affinity: %s, %v", v6, err)
	}
}

func TestRecordedIPAMHandles(t *testing.T) {
	n := 0
	for _, rec := range recordedObjects(t, kdd.KindIPAMHandle) {
		r, id, err := kdd.HandleFromCR(rec.Object)
		if err != nil || "IPAMHandle/"+id != rec.Key || kdd.HandleName(id) != r.Name {
			t.Fatalf("%s: %q %v", rec.Key, id, err)
		}
		sameThroughIPAMTypes[ipam.Handle](t, rec.Key, r.Model)
		checkIPAMRoundTrip(t, rec, func(ex []byte) ([]byte, error) { return kdd.HandleToCR(id, r.Model, ex) })
		n++
	}
	if n != 3 {
		t.Errorf("%d handles", n)
	}
}

// TestRecordedIPAMConfig: the recorded IPAMConfig reads as exactly the
// value real Calico stored in etcd mode.
func TestRecordedIPAMConfig(t *testing.T) {
	rec := recordedObjects(t, kdd.KindIPAMConfig)[0]
	r, err := kdd.ConfigFromCR(rec.Object)
	if err != nil || string(r.Model) != `{"auto_allocate_blocks":true,"kubeVirtVMAddressPersistence":"Enabled"}` {
		t.Fatalf("%s %v", r.Model, err)
	}
	if etcd := etcdValue(t, "/calico/ipam/v2/config"); etcd != string(r.Model) {
		t.Errorf("model %s; etcd recording %s", r.Model, etcd)
	}
	sameThroughIPAMTypes[ipam.Config](t, rec.Key, r.Model)
	checkIPAMRoundTrip(t, rec, func(ex []byte) ([]byte, error) { return kdd.ConfigToCR(r.Model, ex) })
}

// TestEtcdIPAMValuesRoundTrip: every IPAM value real Calico stored in etcd
// converts to a custom resource and back to the same bytes.
func TestEtcdIPAMValuesRoundTrip(t *testing.T) {
	kvs, err := compat.EtcdDump()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, kv := range kvs {
		var back []byte
		switch {
		case strings.Contains(kv.Key, "/ipam/v2/assignment/"):
			cr, err := kdd.BlockToCR([]byte(kv.Value), nil)
			if err != nil {
				t.Fatalf("%s: %v", kv.Key, err)
			}
			r, _, err := kdd.BlockFromCR(cr)
			if err != nil {
				t.Fatalf("%s: %v", kv.Key, err)
			}
			back = r.Model
		case strings.HasPrefix(kv.Key, "/calico/ipam/v2/handle/"):
			id := strings.TrimPrefix(kv.Key, "/calico/ipam/v2/handle/")
			cr, err := kdd.HandleToCR(id, []byte(kv.Value), nil)
			if err != nil {
				t.Fatalf("%s: %v", kv.Key, err)
			}
			r, gotID, err := kdd.HandleFromCR(cr)
			if err != nil || gotID != id {
				t.Fatalf("%s: %q %v", kv.Key, gotID, err)
			}
			back = r.Model
		default:
			continue
		}
		n++
		if string(back) != kv.Value {
			t.Errorf("%s:\n got %s\nwant %s", kv.Key, back, kv.Value)
		}
	}
	if n < 5 {
		t.Errorf("only %d IPAM values", n)
	}
}

func etcdValue(t *testing.T, key string) string {
	t.Helper()
	kvs, err := compat.EtcdDump()
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range kvs {
		if kv.Key == key {
			return kv.Value
		}
	}
	t.Fatalf("%s not recorded", key)
	return ""
}

func TestIPAMRefusals(t *testing.T) {
	for _, c := range []struct {
		name string
		err  func() error
		want string
	}{
		{"block field", func() error { _, err := kdd.BlockToCR([]byte(`{"cidr":"10.0.0.0/26","colour":1}`), nil); return err }, "colour"},
		{"block cidr", func() error { _, err := kdd.BlockToCR([]byte(`{"cidr":"nope"}`), nil); return err }, "cidr"},
		{"affinity field", func() error {
			_, err := kdd.AffinityToCR("n", netip.MustParsePrefix("10.0.0.0/26"), []byte(`{"state":"confirmed","x":1}`), nil)
			return err
		}, "x"},
		{"affinity type", func() error {
			_, _, _, err := kdd.AffinityFromCR([]byte(`{"apiVersion":"crd.projectcalico.org/v1","kind":"BlockAffinity","metadata":{"name":"a"},"spec":{"cidr":"10.0.0.0/26","deleted":"false","node":"n","state":"confirmed","type":"virtual"}}`))
			return err
		}, "spec.type"},
		{"affinity deleted", func() error {
			_, _, _, err := kdd.AffinityFromCR([]byte(`{"apiVersion":"crd.projectcalico.org/v1","kind":"BlockAffinity","metadata":{"name":"a"},"spec":{"cidr":"10.0.0.0/26","deleted":"no","node":"n","state":"confirmed"}}`))
			return err
		}, "spec.deleted"},
		{"handle id", func() error {
			_, _, err := kdd.HandleFromCR([]byte(`{"apiVersion":"crd.projectcalico.org/v1","kind":"IPAMHandle","metadata":{"name":"a"},"spec":{"block":{}}}`))
			return err
		}, "spec.handleID"},
		{"config field", func() error {
			_, err := kdd.ConfigToCR([]byte(`{"auto_allocate_blocks":true,"strictAffinity":true}`), nil)
			return err
		}, "strictAffinity"},
		{"wrong kind", func() error {
			_, err := kdd.ConfigFromCR([]byte(`{"apiVersion":"crd.projectcalico.org/v1","kind":"IPAMBlock","metadata":{"name":"default"},"spec":{}}`))
			return err
		}, "IPAMConfig"},
	} {
		if err := c.err(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want an error naming %s", c.name, err, c.want)
		}
	}
}
