// Package nstest holds what kernel tests share: the prerequisite check that
// fails in CI instead of skipping, and network namespaces that go away when
// the test ends. It is imported only by tests.
package nstest

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/testutils"
)

// NeedKernel skips a kernel test without root or any of the commands,
// except in CI (CI=true), where a missing prerequisite is a failure.
func NeedKernel(t testing.TB, cmds ...string) {
	t.Helper()
	var missing []string
	if os.Geteuid() != 0 {
		missing = append(missing, "root")
	}
	for _, c := range cmds {
		if _, err := exec.LookPath(c); err != nil {
			missing = append(missing, c)
		}
	}
	if len(missing) == 0 {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("kernel test needs %s (CI=true: not skipping)", strings.Join(missing, ", "))
	}
	t.Skipf("kernel test needs %s", strings.Join(missing, ", "))
}

// NewNS creates a network namespace that is removed when the test ends,
// also when it fails; its interfaces, iptables tables and ipsets go with it.
func NewNS(t testing.TB) ns.NetNS {
	t.Helper()
	n, err := testutils.NewNS()
	if err != nil {
		t.Fatalf("creating netns: %v", err)
	}
	t.Cleanup(func() {
		_ = n.Close()
		if err := testutils.UnmountNS(n); err != nil {
			t.Errorf("removing network namespace %s: %v", n.Path(), err)
		}
	})
	return n
}
