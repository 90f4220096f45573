package derive_test

import (
	"encoding/json"
	"net/netip"
	"os"
	"strings"
	"testing"

	"github.com/calico-aio/calico-aio/store/kdd/derive"
)

// recordedPodPatches are the bodies of the pods/<pod>/status patches in
// ../testdata/api-calls.json, by path, in order.
func recordedPodPatches(t *testing.T) map[string][]json.RawMessage {
	t.Helper()
	b, err := os.ReadFile("../testdata/api-calls.json")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Operations []struct {
			Calls []struct {
				Verb, Path string
				Body       json.RawMessage
			}
		}
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	out := map[string][]json.RawMessage{}
	for _, op := range f.Operations {
		for _, c := range op.Calls {
			if c.Verb == "patch" && strings.HasSuffix(c.Path, "/status") && strings.Contains(c.Path, "/pods/") {
				out[c.Path] = append(out[c.Path], c.Body)
			}
		}
	}
	return out
}

// TestRecordedPodPatches: ADD's and DEL's pod status patches are the
// bodies Calico's CNI plugin sent.
func TestRecordedPodPatches(t *testing.T) {
	patches := recordedPodPatches(t)
	web2 := patches["/api/v1/namespaces/shop/pods/web-2/status"]
	if len(web2) != 3 {
		t.Fatalf("web-2 patches: %d", len(web2))
	}
	add, err := derive.AddPatch("612f7a0edd33d5c1a7f59b38db605f5f0f9bf63cb4ce753b9bad0ff3aa941412", []netip.Prefix{netip.MustParsePrefix("10.244.166.129/32")})
	if err != nil || !sameJSON(t, add, web2[0]) {
		t.Errorf("ADD patch %s, %v\nwant %s", add, err, web2[0])
	}
	del, err := derive.DelPatch("201", "f6e8204f-f8c8-4065-b562-ccc8bc61b5e9")
	if err != nil || !sameJSON(t, del, web2[1]) {
		t.Errorf("DEL patch %s, %v\nwant %s", del, err, web2[1])
	}
	dual, _ := derive.AddPatch("c", []netip.Prefix{netip.MustParsePrefix("10.0.0.1/32"), netip.MustParsePrefix("fd00::1/128")})
	if !strings.Contains(string(dual), `"cni.projectcalico.org/podIP":"10.0.0.1/32","cni.projectcalico.org/podIPs":"10.0.0.1/32,fd00::1/128"`) {
		t.Errorf("dual-stack ADD patch %s", dual)
	}
}
