package iptables

import (
	"os"
	"testing"

	"github.com/calico-aio/calico-aio/internal/nstest"
)

// opCounts counts what a driver's Observer is told.
type opCounts map[Op]int

func (c opCounts) observe(e Exec) { c[e.Op]++ }

// TestTableResyncKernel: on the nf_tables backend the periodic Resync
// reads the table back only when the kernel's nf_tables generation moved
// since the cached view was made (issue #25: the idle agent's resync must
// not run iptables-save of a large table for nothing). Counted through the
// Observer: our own writes keep the cache current; a resync with nothing
// changed runs no command; a rule deleted by hand, or any foreign change,
// makes the next resync read back and repair.
func TestTableResyncKernel(t *testing.T) {
	nstest.NeedKernel(t, "iptables-save", "iptables-restore", "iptables", "ip6tables")
	t.Parallel()
	n := nstest.NewNS(t)
	c := opCounts{}
	tb := NewTable("filter", 4, TableOptions{Hooks: kernelHooks, LockWait: true, Observer: c.observe})
	if !isNFTBackend(tb.save) {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is not iptables-nft (CI=true: not skipping)", tb.save)
		}
		t.Skipf("%s is not iptables-nft", tb.save)
	}
	cs := kernelChains()
	tb.SetChains(cs)
	applyIn(t, n, tb)
	step := func(what string, change func(), saves, restores int) {
		t.Helper()
		change()
		clear(c)
		tb.Resync()
		if !tb.Dirty() {
			t.Fatalf("%s: Resync left the table clean", what)
		}
		applyIn(t, n, tb)
		if c[OpSave] != saves || c[OpRestore] != restores {
			t.Errorf("%s: resync ran %d saves and %d restores, want %d and %d", what, c[OpSave], c[OpRestore], saves, restores)
		}
		fresh := NewTable("filter", 4, TableOptions{Hooks: kernelHooks})
		fresh.SetChains(cs)
		if st := applyIn(t, n, fresh); st.RestoreRan {
			t.Fatalf("%s: kernel not converged: a fresh Table wrote %+v", what, st)
		}
	}
	step("nothing changed since the first apply", func() {}, 0, 0)
	step("after our own one-rule change", func() {
		cs[0].Rules[2].Match = "-s 10.1.0.0/16"
		tb.SetChains(cs)
		applyIn(t, n, tb)
	}, 0, 0)
	step("a rule of ours deleted by hand", func() { sh(t, n, "iptables", "-D", "cali-wl", "1") }, 1, 1)
	step("a foreign change in another table", func() { sh(t, n, "ip6tables", "-t", "nat", "-N", "other") }, 1, 0)
	step("nothing changed since the repair", func() {}, 0, 0)
}

// TestGenerations: the shared record of the nf_tables generation keeps a
// table's cache current across the other tables' own restores, and loses
// every table's on a foreign commit until each has been read again.
func TestGenerations(t *testing.T) {
	g := &Generations{}
	g.begin(10)
	a := g.end(10, 11, true, true, 0) // table a read and restored
	g.begin(11)
	b := g.end(11, 11, false, true, 0) // table b read, nothing to write
	g.begin(11)
	a = g.end(11, 12, true, false, a) // a restored from its cache
	if !g.current(12, a) || !g.current(12, b) {
		t.Fatalf("our own restores lost a cache: %+v a=%d b=%d", g, a, b)
	}
	if g.current(13, a) || g.current(13, b) {
		t.Fatal("a foreign commit (generation 13) went unseen")
	}
	g.begin(13) // a applied from its cache after the foreign commit
	a = g.end(13, 14, true, false, a)
	if a != 0 || g.current(14, b) {
		t.Fatalf("after a foreign commit a cache counts as current: a=%d, b current %v", a, g.current(14, b))
	}
	g.begin(14)
	b = g.end(14, 14, false, true, b) // b read back
	if !g.current(14, b) || g.current(14, a) {
		t.Fatalf("read back, b is current, a is not: %+v a=%d b=%d", g, a, b)
	}
	g.begin(14)
	if e := g.end(14, 16, true, true, 0); e != 0 || g.current(16, b) {
		t.Fatal("a commit by someone else during a restore went unseen")
	}
}
