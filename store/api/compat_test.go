package api

import (
	"encoding/json"
	"github.com/calico-aio/calico-aio/store/storetest/compat"
	"reflect"
	"strings"
	"testing"
)

// readDump returns the key/value pairs of Calico's etcd dump.
func readDump(t *testing.T) []compat.KV {
	t.Helper()
	kvs, err := compat.EtcdDump()
	if err != nil {
		t.Fatal(err)
	}
	return kvs
}

// TestCalicoDumpRoundTrip decodes every v3 resource Calico wrote, checks its
// kind, name and namespace against the key, re-encodes it and compares the
// JSON shape with Calico's, and validates it.
func TestCalicoDumpRoundTrip(t *testing.T) {
	const prefix = "/calico/resources/v3/projectcalico.org/"
	seen := map[string]int{}
	for _, kv := range readDump(t) {
		key, val := kv.Key, kv.Value
		if !strings.HasPrefix(key, prefix) {
			continue
		}
		t.Run(strings.TrimPrefix(key, prefix), func(t *testing.T) {
			parts := strings.Split(strings.TrimPrefix(key, prefix), "/")
			k, ok := LookupKind(parts[0])
			if !ok {
				t.Fatalf("no kind for plural %q", parts[0])
			}
			wantParts := 2
			if k.Namespaced {
				wantParts = 3
			}
			if len(parts) != wantParts {
				t.Fatalf("key has %d segments after the prefix; %s wants %d", len(parts), k.Kind, wantParts)
			}
			r, err := Decode([]byte(val))
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if got := r.GetTypeMeta().Kind; got != k.Kind {
				t.Errorf("kind %q, key says %q", got, k.Kind)
			}
			m := r.GetObjectMeta()
			if m.Name != parts[len(parts)-1] {
				t.Errorf("name %q, key says %q", m.Name, parts[len(parts)-1])
			}
			if k.Namespaced && m.Namespace != parts[1] {
				t.Errorf("namespace %q, key says %q", m.Namespace, parts[1])
			}
			out, err := json.Marshal(r)
			if err != nil {
				t.Fatalf("Marshal: %v", err)
			}
			var want, got map[string]any
			if err := json.Unmarshal([]byte(val), &want); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(want, got) {
				t.Errorf("re-encoded JSON differs\ncalico: %s\nours:   %s", val, out)
			}
			if err := r.Validate(); err != nil {
				t.Errorf("Validate: %v", err)
			}
			// Defaulting what Calico wrote must not change it either.
			r.Default()
			again, _ := json.Marshal(r)
			var defaulted map[string]any
			if err := json.Unmarshal(again, &defaulted); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(want, defaulted) {
				t.Errorf("Default changed a stored object\ncalico: %s\nours:   %s", val, again)
			}
			seen[k.Kind]++
		})
	}
	for _, kind := range []string{"ClusterInformation", "IPPool", "Node", "Profile", "Tier", "WorkloadEndpoint"} {
		if seen[kind] == 0 {
			t.Errorf("dump had no %s to check", kind)
		}
	}
}
