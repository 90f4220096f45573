// Package compat carries what real Calico v3.32.1 wrote and printed (etcd
// datastore mode), recorded once and kept in the repository so tests read
// nothing outside it. It imports only the standard library, so any test,
// including a package's internal tests, can use it without an import cycle.
package compat

import (
	_ "embed"
	"fmt"
	"strings"
)

// CalicoVersion is the Calico release the recorded data comes from and the
// API version we write into ClusterInformation.
const CalicoVersion = "v3.32.1"

//go:embed testdata/calico-v3.32-etcd-dump.txt
var etcdDump string

//go:embed testdata/calicoctl-v3.32-output.txt
var calicoctlOutput string

// KV is one etcd key and its value as Calico stored it.
type KV struct{ Key, Value string }

// EtcdDump returns every key under /calico with its value, in the recorded
// order (the file alternates keys and values, one per line).
func EtcdDump() ([]KV, error) {
	var lines []string
	for _, l := range strings.Split(etcdDump, "\n") {
		if strings.TrimSpace(l) != "" {
			lines = append(lines, l)
		}
	}
	if len(lines)%2 != 0 {
		return nil, fmt.Errorf("compat dump has %d non-empty lines; want key/value pairs", len(lines))
	}
	out := make([]KV, 0, len(lines)/2)
	for i := 0; i < len(lines); i += 2 {
		if !strings.HasPrefix(lines[i], "/calico/") {
			return nil, fmt.Errorf("compat dump line %d: want a key, got %.60q", i+1, lines[i])
		}
		out = append(out, KV{lines[i], lines[i+1]})
	}
	return out, nil
}

// CalicoctlOutput is what real calicoctl v3.32.1 printed for a handful of
// commands (see testdata/README.md).
func CalicoctlOutput() string { return calicoctlOutput }
