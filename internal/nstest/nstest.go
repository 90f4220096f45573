// Package nstest holds what kernel tests share: the prerequisite check that
// fails in CI instead of skipping, and network namespaces that go away when
// the test ends. It is imported only by tests.
package nstest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/testutils"
	"golang.org/x/sys/unix"
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
		if err := RemoveNS(n); err != nil {
			t.Errorf("removing network namespace %s: %v", n.Path(), err)
		}
	})
	return n
}

// RemoveNS closes n and removes its name. The unmount is retried for a
// while when the kernel finds the name busy: a process forked elsewhere in
// the test binary holds copies of all its descriptors, n's among them,
// until it has exec'd. A holder that stays past the retries is an error.
func RemoveNS(n ns.NetNS) error {
	_ = n.Close()
	var err error
	for wait := 10 * time.Millisecond; ; wait *= 2 {
		err = unix.Unmount(n.Path(), 0)
		if !errors.Is(err, unix.EBUSY) || wait > 3*time.Second {
			break
		}
		time.Sleep(wait)
	}
	if err != nil && !errors.Is(err, unix.EINVAL) { // EINVAL: not mounted (any more)
		return fmt.Errorf("unmounting %s: %w", n.Path(), err)
	}
	if err := os.Remove(n.Path()); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing %s: %w", n.Path(), err)
	}
	return nil
}
