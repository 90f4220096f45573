package iptables

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/calico-aio/calico-aio/internal/nstest"
)

// TestTableLockWaitArgs: iptables-restore is told how long to wait for the
// xtables lock and how often to probe it, as Felix does for an
// iptables-restore that takes the lock itself: iptablesLockTimeout in
// whole seconds (0: 10) and iptablesLockProbeInterval in microseconds
// (0: 50 ms). The observer sees the arguments run.
func TestTableLockWaitArgs(t *testing.T) {
	for _, tc := range []struct {
		timeout, probe time.Duration
		want           string
	}{
		{0, 0, "--noflush --wait 10 --wait-interval 50000"},
		{3 * time.Second, 20 * time.Millisecond, "--noflush --wait 3 --wait-interval 20000"},
		{1500 * time.Millisecond, time.Second, "--noflush --wait 2 --wait-interval 1000000"},
	} {
		f := newFakeIPT()
		var restores []string
		tb := NewTable("filter", 4, TableOptions{Hooks: fwdHooks, LockWait: true, LockTimeout: tc.timeout, LockProbeInterval: tc.probe,
			Observer: func(e Exec) {
				if e.Op == OpRestore {
					restores = append(restores, e.Cmd+" "+strings.Join(e.Args, " "))
				}
			}})
		tb.run, tb.retryWait = f.run, 0
		tb.SetChains(baseChains())
		mustApply(t, tb)
		if want := []string{"iptables-restore " + tc.want}; !slices.Equal(restores, want) {
			t.Errorf("timeout %s probe %s: ran %q, want %q", tc.timeout, tc.probe, restores, want)
		}
	}
	// Without LockWait nothing about the lock is passed.
	f := newFakeIPT()
	var args []string
	tb := NewTable("filter", 4, TableOptions{Hooks: fwdHooks, LockTimeout: time.Second, Observer: func(e Exec) {
		if e.Op == OpRestore {
			args = e.Args
		}
	}})
	tb.run, tb.retryWait = f.run, 0
	tb.SetChains(baseChains())
	mustApply(t, tb)
	if !slices.Equal(args, []string{"--noflush"}) {
		t.Errorf("without LockWait: %q", args)
	}
}

// TestTableLockTimeoutKernel: legacy iptables-restore, in a test-made
// namespace, waits for the xtables lock as long as the lock timeout says
// and then fails; once the lock is free the same Apply succeeds. The lock
// is a test-made file (XTABLES_LOCKFILE), never the host's /run/xtables.lock.
func TestTableLockTimeoutKernel(t *testing.T) {
	nstest.NeedKernel(t, "iptables-legacy-save", "iptables-legacy-restore")
	n := nstest.NewNS(t)
	lockPath := filepath.Join(t.TempDir(), "xtables.lock")
	t.Setenv("XTABLES_LOCKFILE", lockPath)
	lock, err := os.OpenFile(lockPath, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	tb := NewTable("filter", 4, TableOptions{Hooks: kernelHooks, LockWait: true, LockTimeout: time.Second,
		LockProbeInterval: 10 * time.Millisecond, SaveCmd: "iptables-legacy-save", RestoreCmd: "iptables-legacy-restore"})
	tb.SetChains(baseChains())
	applyErr := applyErrIn(n, tb)
	if applyErr == nil || !strings.Contains(applyErr.Error(), "xtables lock") {
		t.Fatalf("restore while another holds the lock: %v, want the xtables lock error", applyErr)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_UN); err != nil {
		t.Fatal(err)
	}
	if err := applyErrIn(n, tb); err != nil {
		t.Fatalf("restore with the lock free: %v", err)
	}
	if out := saved(t, n, "iptables-legacy-save", "filter"); !strings.Contains(out, ":cali-FORWARD") {
		t.Errorf("chains not written:\n%s", out)
	}
}

// applyErrIn runs tb.Apply inside namespace n and returns its error.
func applyErrIn(n ns.NetNS, tb *Table) error {
	var err error
	if derr := n.Do(func(ns.NetNS) error { _, err = tb.Apply(); return nil }); derr != nil {
		return derr
	}
	return err
}
