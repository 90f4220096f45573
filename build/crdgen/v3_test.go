package main

import (
	"reflect"
	"slices"
	"testing"

	"github.com/calico-aio/calico-aio/e2e/kubeapi"
)

// crdsV3File are the v3 CRDs the Kubernetes backend's v3 tests install.
const crdsV3File = "../../store/kube/testdata/crds-v3.yaml"

func TestCheckedInV3CRDsAreGenerated(t *testing.T) {
	checkGenerated(t, crdsV3File, GenerateV3)
}

// Each v3 CRD is its v1 counterpart in the projectcalico.org group, version
// v3: same kind, plural, scope and schema; the IPAM kinds are not there.
func TestV3CRDsAreTheV1KindsInTheV3Group(t *testing.T) {
	v1 := map[string]obj{}
	for _, crd := range loadCRDs(t) {
		v1[crdKind(crd)] = crd
	}
	v3, err := kubeapi.ReadManifest(crdsV3File)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, crd := range v3 {
		kind := crdKind(crd)
		kinds = append(kinds, kind)
		spec, old := crd["spec"].(obj), v1[kind]["spec"].(obj)
		if spec["group"] != "projectcalico.org" {
			t.Errorf("%s: group %v", kind, spec["group"])
		}
		ver := spec["versions"].([]any)[0].(obj)
		if ver["name"] != "v3" {
			t.Errorf("%s: version %v", kind, ver["name"])
		}
		oldVer := old["versions"].([]any)[0].(obj)
		if !reflect.DeepEqual(spec["names"], old["names"]) || spec["scope"] != old["scope"] || !reflect.DeepEqual(ver["schema"], oldVer["schema"]) {
			t.Errorf("%s: names, scope or schema differ from the v1 CRD's", kind)
		}
	}
	for _, k := range notOnV3 {
		if slices.Contains(kinds, k) {
			t.Errorf("%s is in the v3 CRDs", k)
		}
	}
	if len(kinds)+len(notOnV3) != len(v1) {
		t.Errorf("%d v3 CRDs + %d left out, want the %d v1 ones", len(kinds), len(notOnV3), len(v1))
	}
}

func crdKind(crd obj) string {
	return crd["spec"].(obj)["names"].(obj)["kind"].(string)
}
