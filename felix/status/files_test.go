package status

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/calico-aio/calico-aio/internal/epstatus"
	"github.com/calico-aio/calico-aio/store/api"
)

func statusDirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// TestEndpointStatusFiles: the directory holds exactly the programmed
// endpoints' files (an earlier run's leftovers go), a removed endpoint's
// file goes, a file someone else removed comes back at the next resync (a
// sync in between writes only what changed), a new prefix moves the files
// and none removes them.
func TestEndpointStatusFiles(t *testing.T) {
	runDir, other := t.TempDir(), t.TempDir()
	dir := filepath.Join(runDir, epstatus.Dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "k8s ns%2Fgone eth0"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	f := &Files{}
	apply := func(prefix *string, names ...string) {
		t.Helper()
		want := map[string]bool{}
		for _, n := range names {
			want[n] = true
		}
		f.Configure(FilesPrefix(&api.FelixConfigurationSpec{EndpointStatusPathPrefix: prefix}, runDir))
		f.Set(want)
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	apply(nil, "k8s ns%2Fa eth0", "k8s ns%2Fb eth0")
	if got := statusDirNames(t, dir); !slices.Equal(got, []string{"k8s ns%2Fa eth0", "k8s ns%2Fb eth0"}) {
		t.Errorf("status files %q, want a and b (the leftover removed)", got)
	}
	apply(nil, "k8s ns%2Fb eth0")
	if got := statusDirNames(t, dir); !slices.Equal(got, []string{"k8s ns%2Fb eth0"}) {
		t.Errorf("status files %q after a's endpoint went, want b only", got)
	}
	if err := os.Remove(filepath.Join(dir, "k8s ns%2Fb eth0")); err != nil {
		t.Fatal(err)
	}
	apply(nil, "k8s ns%2Fb eth0", "k8s ns%2Fc eth0")
	if got := statusDirNames(t, dir); !slices.Equal(got, []string{"k8s ns%2Fc eth0"}) {
		t.Errorf("status files %q: want c written and no read-back of the directory before a resync", got)
	}
	f.Resync()
	apply(nil, "k8s ns%2Fb eth0")
	if got := statusDirNames(t, dir); !slices.Equal(got, []string{"k8s ns%2Fb eth0"}) {
		t.Errorf("status files %q after another removed b's and a resync, want it written again (and c gone)", got)
	}
	apply(&other, "k8s ns%2Fb eth0")
	if got, moved := statusDirNames(t, dir), statusDirNames(t, filepath.Join(other, epstatus.Dir)); len(got) != 0 || !slices.Equal(moved, []string{"k8s ns%2Fb eth0"}) {
		t.Errorf("after a new prefix: old dir %q, new dir %q", got, moved)
	}
	none := "none"
	apply(&none, "k8s ns%2Fb eth0")
	if got := statusDirNames(t, filepath.Join(other, epstatus.Dir)); len(got) != 0 {
		t.Errorf("status files %q with endpointStatusPathPrefix none", got)
	}
}

func TestEndpointStatusFileName(t *testing.T) {
	w := &api.WorkloadEndpoint{}
	w.Metadata.Namespace = "web"
	w.Spec.Orchestrator, w.Spec.Pod, w.Spec.Endpoint = "k8s", "nginx-1", "eth0"
	if got := epstatus.FileName(w); got != "k8s web%2Fnginx-1 eth0" {
		t.Errorf("k8s status file %q", got)
	}
	c := &api.WorkloadEndpoint{}
	c.Metadata.Namespace = "default"
	c.Spec.Orchestrator, c.Spec.ContainerID, c.Spec.Endpoint = "cni", "abc 1", "eth0"
	if got := epstatus.FileName(c); got != "cni default%2Fabc%201 eth0" {
		t.Errorf("cni status file %q", got)
	}
}
