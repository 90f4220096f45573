// Package e2e drives the real built binary: as calico-node, calicoctl and
// the CNI plugins, across nodes made of network namespaces.
package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// binary is the path of the multi-call binary under test.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "calico-aio-e2e")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := func() int {
		defer os.RemoveAll(dir)
		// Always build: a stale bin/ from an earlier make would test old code.
		binary = filepath.Join(dir, "calico-aio")
		if keep := os.Getenv("E2E_BINARY"); keep != "" {
			binary = keep // kept after the run, e.g. for profiling
		}
		cmd := exec.Command("go", "build", "-trimpath", "-o", binary, "..")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "building the binary: %v\n%s", err, out)
			return 1
		}
		catchSignals()
		code := m.Run()
		if n := sweep(); n > 0 {
			fmt.Fprintf(os.Stderr, "e2e: %d network namespaces outlived their tests (removed now)\n", n)
			code = 1
		}
		if refDir != "" {
			os.RemoveAll(refDir)
		}
		return code
	}()
	os.Exit(code)
}

// runBin runs the binary under a role name with args and stdin.
func runBin(t *testing.T, stdin string, args ...string) (string, string, error) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Stdin = bytes.NewBufferString(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	return out.String(), errb.String(), err
}
