package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// cniBinDir is a CNI_PATH holding our binary as calico and calico-ipam.
func cniBinDir(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	for _, name := range []string{"calico", "calico-ipam"} {
		if err := os.Symlink(binary, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

var (
	refOnce sync.Once
	refDir  string
	refErr  error
)

// referencePlugins builds the reference CNI plugins (portmap, ptp,
// host-local) once, statically, with the Go toolchain, and links them into
// dir.
func referencePlugins(t testing.TB, dir string) {
	t.Helper()
	refOnce.Do(func() {
		refDir, refErr = os.MkdirTemp("", "cni-reference")
		if refErr != nil {
			return
		}
		cmd := exec.Command("go", "install",
			"github.com/containernetworking/plugins/plugins/meta/portmap@v1.9.0",
			"github.com/containernetworking/plugins/plugins/main/ptp@v1.9.0",
			"github.com/containernetworking/plugins/plugins/ipam/host-local@v1.9.0")
		cmd.Env = append(os.Environ(), "GOBIN="+refDir, "CGO_ENABLED=0", "GOFLAGS=-trimpath "+os.Getenv("GOFLAGS"))
		if out, err := cmd.CombinedOutput(); err != nil {
			refErr = err
			t.Logf("go install: %s", out)
		}
	})
	if refErr != nil {
		t.Fatalf("building reference plugins: %v", refErr)
	}
	for _, name := range []string{"portmap", "ptp", "host-local"} {
		if err := os.Symlink(filepath.Join(refDir, name), filepath.Join(dir, name)); err != nil && !os.IsExist(err) {
			t.Fatal(err)
		}
	}
}
