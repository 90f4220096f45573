package iptables

import (
	"errors"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/calico-aio/calico-aio/internal/nstest"
	"github.com/containernetworking/plugins/pkg/ns"
)

// needNFT fails (CI=true) or skips unless iptables is iptables-nft.
func needNFT(t *testing.T) {
	t.Helper()
	nstest.NeedKernel(t, "iptables-save", "iptables-restore", "iptables", "ip6tables-restore")
	if !isNFTBackend("iptables-save") {
		if os.Getenv("CI") == "true" {
			t.Fatal("iptables-save is not iptables-nft (CI=true: not skipping)")
		}
		t.Skip("iptables-save is not iptables-nft")
	}
}

// sessionPid is the pid of the long-lived restore of cmd, or 0.
func sessionPid(s *Sessions, cmd string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.procs[cmd]; p != nil {
		return p.cmd.Process.Pid
	}
	return 0
}

// TestSessionKernel: on the nf_tables backend the Tables of a namespace
// write through one long-lived iptables-restore per binary, block after
// block, each committed before Apply returns (a fresh Table then finds
// nothing to write); a block that changes nothing in the kernel (the
// flush of an empty chain) still completes; a rejected block is reported
// with its own line number and the next Apply starts a new process, as
// does a call from another namespace and a child killed behind our back
// (that Apply retries at once); Close ends them all.
func TestSessionKernel(t *testing.T) {
	needNFT(t)
	t.Parallel()
	n, other := nstest.NewNS(t), nstest.NewNS(t)
	s := NewSessions()
	t.Cleanup(s.Close)
	c := opCounts{}
	opts := TableOptions{Hooks: kernelHooks, LockWait: true, Observer: c.observe, Sessions: s}
	tb := NewTable("filter", 4, opts)
	raw := NewTable("raw", 4, TableOptions{Observer: c.observe, Sessions: s})
	converged := func(cs []Chain) {
		t.Helper()
		fresh := NewTable("filter", 4, TableOptions{Hooks: kernelHooks})
		fresh.SetChains(cs)
		if st := applyIn(t, n, fresh); st.RestoreRan {
			t.Fatalf("kernel not converged after Apply returned: a fresh Table wrote %+v", st)
		}
	}

	cs := kernelChains()
	tb.SetChains(cs)
	applyIn(t, n, tb)
	converged(cs)
	pid := sessionPid(s, "iptables-restore")
	if pid == 0 || s.Running() != 1 {
		t.Fatalf("no long-lived restore after the first Apply (running %d)", s.Running())
	}
	for i, port := range []string{"180", "181", "182"} {
		cs[1].Rules[0].Match = "-p tcp -m tcp --dport " + port
		cs = append(cs, Chain{Name: "cali-n" + port, Rules: []Rule{{Action: "-j ACCEPT"}}})
		tb.SetChains(cs)
		if st := applyIn(t, n, tb); !st.RestoreRan || st.ReadBack {
			t.Fatalf("change %d: %+v", i, st)
		}
		converged(cs)
	}
	raw.SetChains([]Chain{{Name: "cali-PREROUTING", Rules: []Rule{{Action: "-j ACCEPT"}}}})
	applyIn(t, n, raw)
	if got := sessionPid(s, "iptables-restore"); got != pid || s.Running() != 1 {
		t.Fatalf("restore pid %d then %d, %d running: want one process for every block and table", pid, got, s.Running())
	}
	if c[OpRestore] != 5 {
		t.Fatalf("observer told of %d restores, want 5", c[OpRestore])
	}

	// A block with no nf_tables transaction: no generation moves, the
	// child just goes back to reading.
	sh(t, n, "iptables", "-N", "cali-empty")
	in(t, n, func() (sessionResult, error) {
		return s.restore("iptables-restore", []byte("*filter\n:cali-empty - [0:0]\nCOMMIT\n"))
	})

	// A rejected block: its line, counted within the block.
	bad := append(slices.Clone(cs), Chain{Name: "cali-bad", Rules: []Rule{{Match: "-m nosuchmatch"}}})
	tb.SetChains(bad)
	var err error
	_ = n.Do(func(ns.NetNS) error { _, err = tb.Apply(); return nil })
	var re *RestoreError
	if !errors.As(err, &re) || !strings.Contains(re.Input, "nosuchmatch") {
		t.Fatalf("want a RestoreError naming the bad line, got %v", err)
	}
	if !strings.Contains(re.Stderr, "line") {
		t.Fatalf("stderr not kept: %q", re.Stderr)
	}
	tb.SetChains(cs)
	applyIn(t, n, tb)
	converged(cs)
	if got := sessionPid(s, "iptables-restore"); got == 0 || got == pid {
		t.Fatalf("after the rejected block: pid %d (was %d), want a new process", got, pid)
	}
	pid = sessionPid(s, "iptables-restore")

	// The child killed behind our back (OOM, an operator): the next
	// Apply's block fails to go in, and Apply reads back and retries in a
	// new process at once.
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cs[2].Rules[0].Match = "-d 10.65.0.2/32"
	tb.SetChains(cs)
	if st := applyIn(t, n, tb); !st.StaleCache || !st.RestoreRan {
		t.Fatalf("after the child was killed: %+v, want the block retried from a read-back", st)
	}
	converged(cs)
	if got := sessionPid(s, "iptables-restore"); got == 0 || got == pid {
		t.Fatalf("after the child was killed: pid %d (was %d), want a new process", got, pid)
	}
	pid = sessionPid(s, "iptables-restore")

	// Another namespace: its own process, the first one ended.
	t2 := NewTable("filter", 4, opts)
	t2.SetChains(kernelChains())
	applyIn(t, other, t2)
	if got := sessionPid(s, "iptables-restore"); got == pid || s.Running() != 1 {
		t.Fatalf("another namespace: pid %d (was %d), %d running", got, pid, s.Running())
	}
	if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); err == nil {
		t.Fatalf("the first namespace's restore (pid %d) still runs", pid)
	}

	// IPv6: its own binary, its own process.
	t6 := NewTable("filter", 6, TableOptions{Sessions: s})
	t6.SetChains([]Chain{{Name: "cali-x", Rules: []Rule{{Action: "-j ACCEPT"}}}})
	applyIn(t, other, t6)
	if s.Running() != 2 {
		t.Fatalf("%d running, want iptables-restore and ip6tables-restore", s.Running())
	}
	pid = sessionPid(s, "ip6tables-restore")
	s.Close()
	if s.Running() != 0 {
		t.Fatalf("%d running after Close", s.Running())
	}
	if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); err == nil {
		t.Fatalf("ip6tables-restore (pid %d) still runs after Close", pid)
	}
}
