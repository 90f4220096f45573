package iptables

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
)

// checkCache fails unless tb's cached view is exactly what parsing the
// fake's table gives: the fake stores rules as written, so even the specs
// of our rules must match.
func checkCache(t *testing.T, tb *Table, f *fakeIPT) {
	t.Helper()
	if tb.cache == nil {
		t.Fatal("no cached view after a successful Apply")
	}
	want, err := parseSave(tb.table, []byte(f.dump(tb.table)))
	if err != nil {
		t.Fatal(err)
	}
	if !maps.EqualFunc(tb.cache.chains, want.chains, func(a, b []savedRule) bool {
		return slices.EqualFunc(a, b, func(x, y savedRule) bool {
			return x.spec == y.spec && x.hash == y.hash && slices.Equal(x.targets, y.targets)
		})
	}) {
		t.Fatalf("cached view differs from the table:\n got %+v\nwant %+v", tb.cache.chains, want.chains)
	}
}

// logged returns a driver on f whose commands are recorded.
func logged(f *fakeIPT, hooks map[string]string) (*Table, *cmdLog) {
	tb := fakeTable(f, "filter", hooks)
	l := &cmdLog{next: f.run}
	tb.run = l.run
	return tb, l
}

func TestFakeCacheOneRuleChangeRunsNoSave(t *testing.T) {
	f := newFakeIPT()
	tb, l := logged(f, fwdHooks)
	tb.SetChains(baseChains())
	if st := mustApply(t, tb); !st.ReadBack || l.count("-save") != 1 {
		t.Fatalf("first Apply must read back: %+v, %q", st, l.cmds)
	}
	checkCache(t, tb, f)

	l.reset()
	tb.SetChains(baseChains())
	if st := mustApply(t, tb); st != (ApplyStats{}) || len(l.cmds) != 0 {
		t.Fatalf("no-op Apply with a valid cache: %+v, ran %q", st, l.cmds)
	}

	cs := baseChains()
	cs[2].Rules[0].Match = "-d 10.0.0.2"
	tb.SetChains(cs)
	st := mustApply(t, tb)
	if st.ReadBack || !st.RestoreRan || st.RulesWritten != 1 || st.RulesDeleted != 0 ||
		l.count("-save") != 0 || l.count("-restore") != 1 {
		t.Fatalf("one-rule change: %+v, ran %q", st, l.cmds)
	}
	want := "*filter\n" + renderRule("-R", "cali-to-wl", 1, chainHashes(cs[2])[0], cs[2].Rules[0]) + "\nCOMMIT\n"
	if got := l.last("-restore"); got != want {
		t.Fatalf("restore input:\n%s\nwant:\n%s", got, want)
	}
	checkCache(t, tb, f)
}

func TestFakeCacheHidesDriftUntilInvalidated(t *testing.T) {
	f := newFakeIPT()
	tb, l := logged(f, fwdHooks)
	tb.SetChains(baseChains())
	mustApply(t, tb)
	converged := f.dump("filter")

	ft := f.tables["filter"]
	ft["cali-from-wl"] = ft["cali-from-wl"][1:]                     // someone deletes our rule
	ft["FORWARD"] = append([]string{"-j ACCEPT"}, ft["FORWARD"]...) // and inserts one above the hook
	l.reset()
	if st := mustApply(t, tb); st.RestoreRan || len(l.cmds) != 0 {
		t.Fatalf("drift seen without InvalidateCache: %+v %q", st, l.cmds)
	}
	cs := baseChains()
	cs[2].Rules = append(cs[2].Rules, Rule{Action: "-j RETURN"})
	tb.SetChains(cs)
	if st := mustApply(t, tb); st.ReadBack || st.RulesWritten != 1 || l.count("-save") != 0 {
		t.Fatalf("change elsewhere: %+v %q", st, l.cmds)
	}
	if got := f.tables["filter"]["cali-from-wl"]; len(got) != 1 {
		t.Fatalf("deleted rule repaired without a read-back: %q", got)
	}

	tb.InvalidateCache()
	if !tb.Dirty() {
		t.Fatal("InvalidateCache did not mark the table dirty")
	}
	l.reset()
	st := mustApply(t, tb)
	// cali-from-wl: the deleted rule 1 inserted again (rule 2 keeps its
	// hash and stays); the hook moved up (deleted and inserted).
	if !st.ReadBack || st.RulesWritten != 2 || st.RulesDeleted != 1 || l.count("-save") != 1 {
		t.Fatalf("resync: %+v %q", st, l.cmds)
	}
	checkCache(t, tb, f)
	f2 := newFakeIPT()
	f2.tables["filter"] = map[string][]string{"INPUT": nil, "FORWARD": {"-j ACCEPT"}, "OUTPUT": nil}
	tb2 := fakeTable(f2, "filter", fwdHooks)
	tb2.SetChains(cs)
	mustApply(t, tb2)
	if got, want := f.dump("filter"), f2.dump("filter"); got != want {
		t.Fatalf("after resync:\n%q\nwant:\n%q", rules(got), rules(want))
	}
	if f.dump("filter") == converged {
		t.Fatal("test is vacuous")
	}
}

func TestFakeCacheRestoreErrorInvalidates(t *testing.T) {
	f := newFakeIPT()
	tb, l := logged(f, fwdHooks)
	tb.SetChains(baseChains())
	mustApply(t, tb)

	// A genuine error: the cached attempt fails, the retry from a fresh
	// read fails too; the error is returned and the cache stays invalid.
	f.failOn = "-j REJECT"
	cs := append(baseChains(), Chain{Name: "cali-new", Rules: []Rule{{Action: "-j REJECT"}}})
	tb.SetChains(cs)
	l.reset()
	st, err := tb.Apply()
	var re *RestoreError
	if !errors.As(err, &re) || !st.StaleCache || !st.ReadBack || !tb.Dirty() || tb.cache != nil ||
		l.count("-save") != 1 || l.count("-restore") != 2 {
		t.Fatalf("want a RestoreError after one re-read, got %v, %+v, %q", err, st, l.cmds)
	}
	f.failOn = ""
	l.reset()
	if st := mustApply(t, tb); !st.ReadBack || st.StaleCache || l.count("-save") != 1 {
		t.Fatalf("Apply after a failure must read back: %+v %q", st, l.cmds)
	}
	checkCache(t, tb, f)

	// A stale cache: a chain we change was deleted by hand, so the cached
	// restore fails; Apply re-reads and repairs in the same call.
	delete(f.tables["filter"], "cali-new")
	cs[3].Rules[0].Action = "-j DROP"
	tb.SetChains(cs)
	l.reset()
	st = mustApply(t, tb)
	if !st.StaleCache || !st.ReadBack || st.ChainsCreated != 1 || l.count("-save") != 1 || l.count("-restore") != 2 {
		t.Fatalf("stale cache: %+v %q", st, l.cmds)
	}
	checkCache(t, tb, f)
	if got := f.tables["filter"]["cali-new"]; len(got) != 1 || !strings.HasSuffix(got[0], "-j DROP") {
		t.Fatalf("cali-new: %q", got)
	}

	// A failed read-back leaves no cache either.
	tb.InvalidateCache()
	f.failSave = 3
	if _, err := tb.Apply(); err == nil || tb.cache != nil || !tb.Dirty() {
		t.Fatalf("failed save: err=%v", err)
	}
	if st := mustApply(t, tb); !st.ReadBack || st.RestoreRan {
		t.Fatalf("after a failed save: %+v", st)
	}
}

// TestRuleHashStable pins the hash format: an agent recognises what an
// earlier version wrote only while the hashes stay the same.
func TestRuleHashStable(t *testing.T) {
	for _, c := range []struct {
		chain string
		i     int
		r     Rule
		want  string
	}{
		{"cali-FORWARD", 0, Rule{Match: " -i cali+ ", Action: "-j cali-from-wl"}, "p3sW8C9Wnou1bHHw"},
		{"FORWARD", 0, Rule{Action: "-j cali-FORWARD"}, "Miz7312eq4bKtjWd"},
		{"cali-x", 12345, Rule{Match: "-s 10.0.0.1", Action: "-j DROP", Comment: `to "wl" \ back ü`}, "H7DUJHDxRX_0Eo7d"},
		{"cali-empty", 3, Rule{}, "ap1-WtZEMmlj3Led"},
		{"cali-long", 1, Rule{Match: strings.Repeat("-s 10.0.0.1 ", 100)}, ""},
	} {
		got := ruleHash(c.chain, Rule{}, c.i, c.r)
		if len(got) != hashLen || (c.want != "" && got != c.want) {
			t.Errorf("ruleHash(%s, %d, %+v) = %q, want %q", c.chain, c.i, c.r, got, c.want)
		}
	}
}

// TestSetChainsReusesUnchangedChains: an unchanged chain keeps its hashes
// and facts, and is still validated against the other chains.
func TestSetChainsReusesUnchangedChains(t *testing.T) {
	tb := fakeTable(newFakeIPT(), "filter", nil)
	cs := baseChains()
	tb.SetChains(cs)
	if tb.invalid != nil {
		t.Fatal(tb.invalid)
	}
	before := tb.desired["cali-from-wl"].hashes
	cs[0].Rules[2].Action = "-j DROP" // the caller reuses its slices
	tb.SetChains(cs)
	if &tb.desired["cali-from-wl"].hashes[0] != &before[0] || !tb.Dirty() {
		t.Fatal("unchanged chain hashed again, or change not seen")
	}
	if tb.desired["cali-FORWARD"].Rules[2].Action != "-j DROP" || tb.desired["cali-FORWARD"].hashes[2] != chainHashes(cs[0])[2] {
		t.Fatal("changed chain not rehashed")
	}
	tb.SetChains(cs[:2]) // cali-FORWARD, unchanged, jumps to cali-to-wl
	if tb.invalid == nil || !strings.Contains(tb.invalid.Error(), "cali-to-wl") {
		t.Fatalf("jump to a chain no longer desired: %v", tb.invalid)
	}
}

// TestSetChainsSharedRules: with SharedRules the very same rules slice
// handed again is taken as unchanged without a look at its rules (the
// caller promised never to change them) and is kept without a copy; a new
// slice with other rules is a change, and a new slice with equal rules is
// not.
func TestSetChainsSharedRules(t *testing.T) {
	tb := fakeTable(newFakeIPT(), "filter", nil)
	tb.sharedRules = true
	cs := baseChains()
	tb.SetChains(cs)
	mustApply(t, tb)
	if &tb.desired["cali-FORWARD"].Rules[0] != &cs[0].Rules[0] {
		t.Fatal("shared rules copied")
	}
	// Only a caller breaking the promise changes rules in place: proof
	// that the same slice is not compared.
	cs[1].Rules[0].Action = "-j DROP"
	tb.SetChains(cs)
	if tb.Dirty() {
		t.Fatalf("the same slices again: dirty, touched %v", tb.touched)
	}
	cs[0].Rules = slices.Clone(cs[0].Rules) // equal rules, new slice
	cs[2].Rules = append(slices.Clone(cs[2].Rules), Rule{Action: "-j RETURN"})
	tb.SetChains(cs)
	if want := []string{cs[2].Name}; !slices.Equal(slices.Sorted(maps.Keys(tb.touched)), want) {
		t.Fatalf("touched %v, want %v", slices.Sorted(maps.Keys(tb.touched)), want)
	}
}

// TestPlanFromSyncedCacheOnlyTouched: after a successful Apply the next
// plan from the cache looks only at the chains SetChains changed, added or
// removed since; a read-back (InvalidateCache) plans every chain again.
// The cache of an untouched chain is emptied behind the Table's back to
// tell the two apart: only the full plan writes its rules again.
func TestPlanFromSyncedCacheOnlyTouched(t *testing.T) {
	f := newFakeIPT()
	tb := fakeTable(f, "filter", fwdHooks)
	cs := baseChains()
	tb.SetChains(cs)
	mustApply(t, tb)
	if len(tb.touched) != 0 || !tb.synced {
		t.Fatalf("after Apply: touched %v, synced %v", tb.touched, tb.synced)
	}
	cs = append(cs, Chain{Name: "cali-new", Rules: []Rule{{Action: "-j RETURN"}}})
	cs[0].Rules = append(slices.Clone(cs[0].Rules[:2]), Rule{Action: "-j cali-new"})
	cs = slices.Delete(cs, 2, 3) // cali-to-wl goes: and cali-FORWARD no longer jumps to it
	cs[0].Rules = slices.DeleteFunc(cs[0].Rules, func(r Rule) bool { return r.Action == "-j cali-to-wl" })
	tb.SetChains(cs)
	if tb.invalid != nil {
		t.Fatal(tb.invalid)
	}
	if want := []string{"cali-FORWARD", "cali-new", "cali-to-wl"}; !slices.Equal(slices.Sorted(maps.Keys(tb.touched)), want) {
		t.Fatalf("touched %v, want %v", slices.Sorted(maps.Keys(tb.touched)), want)
	}
	tb.cache.chains["cali-from-wl"] = nil // untouched: not looked at
	st := mustApply(t, tb)
	if st.ReadBack || st.ChainsCreated != 1 || st.ChainsDeleted != 1 {
		t.Fatalf("incremental apply: %+v", st)
	}
	if got := len(f.table("filter")["cali-from-wl"]); got != 2 {
		t.Fatalf("cali-from-wl has %d rules in the kernel, want its 2 untouched", got)
	}
	tb.InvalidateCache()
	if st := mustApply(t, tb); !st.ReadBack || st.RestoreRan {
		t.Fatalf("read-back apply: %+v", st)
	}
	checkCache(t, tb, f)
	// A full plan sees what the cache lost.
	tb.cache.chains["cali-from-wl"] = nil
	tb.synced = false
	tb.SetChains(append(cs, Chain{Name: "cali-more"}))
	if st := mustApply(t, tb); st.RulesWritten != 2 {
		t.Fatalf("full plan over a cache missing 2 rules: %+v", st)
	}
}
