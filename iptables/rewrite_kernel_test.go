package iptables

import (
	"regexp"
	"testing"

	"github.com/calico-aio/calico-aio/internal/nstest"
)

// positional matches a restore line that names a rule position, which
// makes iptables-nft fetch every rule of the table first.
var positional = regexp.MustCompile(`(?m)^-[IRD] cali-\S+ \d+`)

// TestTableKernelRewrite: on nf_tables (the backend the product runs
// here) changed chains are written without rule positions: a rule changed
// in the middle rewrites its chain (flush and append, one transaction),
// rules added at the end are appended, a chain shortened is rewritten,
// and after each the kernel holds exactly the desired rules (a fresh Table
// finds nothing to write).
func TestTableKernelRewrite(t *testing.T) {
	nstest.NeedKernel(t, "iptables-save", "iptables-restore", "iptables")
	n := nstest.NewNS(t)
	tb := NewTable("filter", 4, TableOptions{Hooks: kernelHooks, LockWait: true})
	l := &cmdLog{next: runCommand}
	tb.run = l.run
	cs := kernelChains()
	tb.SetChains(cs)
	applyIn(t, n, tb)
	if !tb.rewrites() {
		t.Fatal("iptables here is not on nf_tables: the product's mode is not under test")
	}
	converged := func(step string) {
		t.Helper()
		if in := l.last("-restore"); positional.MatchString(in) {
			t.Errorf("%s: restore input names a rule position:\n%s", step, in)
		}
		fresh := NewTable("filter", 4, TableOptions{Hooks: kernelHooks})
		fresh.SetChains(cs)
		if st := applyIn(t, n, fresh); st.RestoreRan {
			t.Fatalf("%s: kernel not converged, a fresh Table wrote %+v", step, st)
		}
	}
	steps := []struct {
		name           string
		change         func()
		written, flush int
	}{
		{"a rule in the middle changed", func() { cs[0].Rules[1].Match = "-o tap+" }, 3, 3},
		{"a rule appended", func() { cs[0].Rules = append(cs[0].Rules, Rule{Match: "-s 10.9.0.0/16", Action: "-j DROP"}) }, 1, 0},
		{"the chain shortened", func() { cs[0].Rules = cs[0].Rules[:2] }, 2, 4},
		{"a rule inserted first", func() { cs[2].Rules = append([]Rule{{Match: "-d 10.65.0.9", Action: "-j DROP"}}, cs[2].Rules...) }, 3, 2},
	}
	for _, s := range steps {
		s.change()
		tb.SetChains(cs)
		st := applyIn(t, n, tb)
		if st.RulesWritten != s.written || st.RulesDeleted != s.flush || st.ReadBack {
			t.Errorf("%s: stats %+v, want %d written, %d flushed", s.name, st, s.written, s.flush)
		}
		converged(s.name)
	}
}
