package api

import (
	"bufio"
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"
)

const etcdDump = "../../../shared/compat/calico-v3.32-etcd-dump.txt"

// readDump returns the key/value pairs of Calico's etcd dump (keys and
// values alternate, one per line).
func readDump(t *testing.T) [][2]string {
	t.Helper()
	f, err := os.Open(etcdDump)
	if os.IsNotExist(err) {
		if os.Getenv("CI") == "true" {
			t.Fatalf("compat data missing in CI: %v", err)
		}
		t.Skipf("compat data not present: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			lines = append(lines, l)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(lines)%2 != 0 {
		t.Fatalf("dump has %d non-empty lines; want key/value pairs", len(lines))
	}
	var kvs [][2]string
	for i := 0; i < len(lines); i += 2 {
		if !strings.HasPrefix(lines[i], "/calico/") {
			t.Fatalf("line %d: want a key, got %.60q", i+1, lines[i])
		}
		kvs = append(kvs, [2]string{lines[i], lines[i+1]})
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
		key, val := kv[0], kv[1]
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
