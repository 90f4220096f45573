package iptables

import "testing"

// TestObserverSeesEveryCommand: the observer hears of each save and restore
// the table runs, failures included, with the table's version and name.
func TestObserverSeesEveryCommand(t *testing.T) {
	f := newFakeIPT()
	var seen []Exec
	tb := NewTable("filter", 4, TableOptions{Hooks: fwdHooks, Observer: func(e Exec) { seen = append(seen, e) }})
	tb.run, tb.retryWait = f.run, 0
	f.failSave = 1
	f.noWait = true // rejected --wait is a probe, not a command to count
	tb.SetChains(baseChains())
	mustApply(t, tb)
	count := func(op Op, failed bool) int {
		n := 0
		for _, e := range seen {
			if e.Op == op && (e.Err != nil) == failed {
				n++
			}
		}
		return n
	}
	if count(OpSave, true) != 1 || count(OpSave, false) != 1 || count(OpRestore, false) != 1 || count(OpRestore, true) != 0 {
		t.Fatalf("first apply: observed %+v", seen)
	}
	for _, e := range seen {
		if e.IPSet || e.IPVersion != 4 || e.Table != "filter" {
			t.Fatalf("exec not labelled with the table: %+v", e)
		}
		if e.Op == OpRestore && e.Lines < 3 {
			t.Fatalf("restore lines = %d, want the input's line count", e.Lines)
		}
	}
	if len(seen) != 3 {
		t.Fatalf("observed %d commands, want a failed save, a save and a restore", len(seen))
	}
	seen = nil
	f.failOn = "-j REJECT"
	tb.SetChains(append(baseChains(), Chain{Name: "cali-new", Rules: []Rule{{Action: "-j REJECT"}}}))
	if _, err := tb.Apply(); err == nil {
		t.Fatal("restore of a rejected rule succeeded")
	}
	if count(OpRestore, true) == 0 {
		t.Fatalf("failed restore not observed: %+v", seen)
	}
}
