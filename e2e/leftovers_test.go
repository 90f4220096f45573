package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"sync"
	"syscall"

	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/calico-aio/calico-aio/internal/nstest"
)

// live is what the tests have made that must not outlive the test binary:
// the network namespaces (bind mounts under /var/run/netns). t.Cleanup
// removes them on every normal path; sweep removes whatever is left when
// the run ends, is interrupted (Ctrl-C, SIGTERM) or a cleanup was missed.
// Child processes need no list: startIn makes the kernel kill them when
// the test binary dies, however it dies.
var live = struct {
	sync.Mutex
	netns map[ns.NetNS]bool
}{netns: map[ns.NetNS]bool{}}

// trackNS records n until the returned function is called.
func trackNS(n ns.NetNS) (untrack func()) {
	live.Lock()
	live.netns[n] = true
	live.Unlock()
	return func() {
		live.Lock()
		delete(live.netns, n)
		live.Unlock()
	}
}

// sweep removes every namespace still recorded and says how many.
func sweep() int {
	live.Lock()
	defer live.Unlock()
	n := len(live.netns)
	for x := range live.netns {
		_ = nstest.RemoveNS(x)
		delete(live.netns, x)
	}
	return n
}

// catchSignals makes Ctrl-C and SIGTERM remove the namespaces before the
// binary exits (child processes die with it, see startIn).
func catchSignals() {
	c := make(chan os.Signal, 1)
	signal.Notify(c, os.Interrupt, syscall.SIGTERM)
	go func() {
		s := <-c
		n := sweep()
		fmt.Fprintf(os.Stderr, "e2e: %v: removed %d network namespaces\n", s, n)
		os.Exit(130)
	}()
}

// startIn starts cmd with its process in namespace n (the current one when
// n is nil) and returns the result of its Wait. The child gets SIGKILL when
// the test binary dies, also when no cleanup can run (a go test timeout, a
// kill): the parent-death signal follows the thread that forked, so that
// thread stays locked to a goroutine until the child has exited, and is
// then discarded with its namespace.
func startIn(n ns.NetNS, cmd *exec.Cmd) (<-chan error, error) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	started := make(chan error, 1)
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
		if n != nil {
			if err := n.Set(); err != nil {
				started <- fmt.Errorf("entering %s: %w", n.Path(), err)
				return
			}
		}
		err := cmd.Start()
		started <- err
		if err == nil {
			done <- cmd.Wait()
		}
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return done, nil
}
