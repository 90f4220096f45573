package kdd_test

import (
	_ "embed"
	"encoding/json"
	"strings"
	"testing"

	"github.com/calico-aio/calico-aio/store/kdd"
)

// api-calls.json is every API request real Calico v3.32.1's CNI plugin,
// calico-ipam and calicoctl made in the recording, with write bodies.
//
//go:embed testdata/api-calls.json
var apiCallsJSON []byte

// recordedWrites are the bodies of the custom resource creates and updates.
func recordedWrites(t *testing.T) []recorded {
	t.Helper()
	var f struct {
		Operations []struct {
			Operation string
			Calls     []struct {
				Verb, Path string
				Body       json.RawMessage
			}
		}
	}
	if err := json.Unmarshal(apiCallsJSON, &f); err != nil {
		t.Fatal(err)
	}
	var out []recorded
	for _, op := range f.Operations {
		for _, c := range op.Calls {
			if (c.Verb == "create" || c.Verb == "update") && strings.HasPrefix(c.Path, "/apis/"+kdd.APIVersion+"/") {
				out = append(out, recorded{Key: c.Verb + " " + c.Path, Step: op.Operation, Object: c.Body})
			}
		}
	}
	return out
}

// rewrite reads a custom resource into its model and writes it again.
func rewrite(cr []byte) ([]byte, error) {
	var tm struct{ Kind string }
	if err := json.Unmarshal(cr, &tm); err != nil {
		return nil, err
	}
	switch tm.Kind {
	case kdd.KindIPAMBlock:
		r, _, err := kdd.BlockFromCR(cr)
		if err != nil {
			return nil, err
		}
		return kdd.BlockToCR(r.Model, nil)
	case kdd.KindBlockAffinity:
		r, node, cidr, err := kdd.AffinityFromCR(cr)
		if err != nil {
			return nil, err
		}
		return kdd.AffinityToCR(node, cidr, r.Model, nil)
	case kdd.KindIPAMHandle:
		r, id, err := kdd.HandleFromCR(cr)
		if err != nil {
			return nil, err
		}
		return kdd.HandleToCR(id, r.Model, nil)
	case kdd.KindIPAMConfig:
		r, err := kdd.ConfigFromCR(cr)
		if err != nil {
			return nil, err
		}
		return kdd.ConfigToCR(r.Model, nil)
	}
	r, err := kdd.CRToModel(cr)
	if err != nil {
		return nil, err
	}
	return kdd.ModelToCR(r.Model, nil)
}

// TestRecordedWriteBodies: every custom resource Calico sent in a create
// or update reads into a model that writes back as the same body (the
// server-side fields aside; a resource's uid comes back by reversal).
func TestRecordedWriteBodies(t *testing.T) {
	writes := recordedWrites(t)
	kinds := map[string]bool{}
	for _, w := range writes {
		got, err := rewrite(w.Object)
		if err != nil {
			t.Errorf("%s (%s): %v", w.Key, w.Step, err)
			continue
		}
		var tm struct{ Kind string }
		_ = json.Unmarshal(w.Object, &tm)
		kinds[tm.Kind] = true
		drop := []string{"creationTimestamp", "resourceVersion"}
		if k, _ := kdd.LookupKind(tm.Kind); k.Storage == kdd.IPAM {
			drop = append(drop, "uid") // IPAM values carry no uid
		}
		if want := withoutServerFields(t, w.Object, drop...); !sameJSON(t, withoutServerFields(t, got, drop...), want) {
			t.Errorf("%s (%s):\n got %s\nwant %s", w.Key, w.Step, got, want)
		}
	}
	for _, k := range []string{"Tier", "GlobalNetworkPolicy", kdd.KindIPAMBlock, kdd.KindBlockAffinity, kdd.KindIPAMHandle, kdd.KindIPAMConfig} {
		if !kinds[k] {
			t.Errorf("no recorded write of a %s checked", k)
		}
	}
}
