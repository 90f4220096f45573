package proccpu

import (
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"
)

// TestDescendants: a child's CPU counts while it runs (a live descendant)
// and after it is reaped (cutime + cstime), and Tree adds the process's own.
func TestDescendants(t *testing.T) {
	self := os.Getpid()
	before, err := Descendants(self)
	if err != nil {
		t.Fatal(err)
	}
	busy := exec.Command("sh", "-c", "end=$(($(date +%s)+1)); while [ $(date +%s) -lt $end ]; do :; done; sleep 30")
	if err := busy.Start(); err != nil {
		t.Fatal(err)
	}
	defer busy.Process.Kill()
	if !slices.Contains(Children(self), busy.Process.Pid) {
		t.Fatalf("the child %d is not among %v", busy.Process.Pid, Children(self))
	}
	var live time.Duration
	for deadline := time.Now().Add(10 * time.Second); live-before < 50*time.Millisecond && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
		if live, err = Descendants(self); err != nil {
			t.Fatal(err)
		}
	}
	if live-before < 50*time.Millisecond {
		t.Fatalf("a busy live child counted %v", live-before)
	}
	busy.Process.Kill()
	busy.Wait()
	reaped, err := Descendants(self)
	if err != nil {
		t.Fatal(err)
	}
	if reaped < live {
		t.Fatalf("after the child was reaped %v, while it ran %v: its CPU was lost", reaped, live)
	}
	for start := time.Now(); time.Since(start) < 150*time.Millisecond; { // CPU of our own
	}
	tree, err := Tree(self)
	if err != nil || tree-reaped < 50*time.Millisecond {
		t.Fatalf("Tree %v (%v), want the descendants' %v and at least 50 ms of our own", tree, err, reaped)
	}
	if _, err := Tree(1 << 30); err == nil {
		t.Fatal("no error for a process that does not exist")
	}
}

// TestSelf: a busy loop in this process shows in Self.
func TestSelf(t *testing.T) {
	before, err := Self()
	if err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(50 * time.Millisecond); time.Now().Before(end); {
	}
	after, err := Self()
	if err != nil {
		t.Fatal(err)
	}
	if after-before < 20*time.Millisecond {
		t.Fatalf("50 ms of spinning counted %v", after-before)
	}
}
