package iptables

import (
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func fakeTable(f *fakeIPT, table string, hooks map[string]string) *Table {
	t := NewTable(table, 4, TableOptions{Hooks: hooks, LockWait: true})
	t.run, t.retryWait = f.run, 0
	t.nft = -1 // the fake has no nf_tables generation
	return t
}

func mustApply(t *testing.T, tb *Table) ApplyStats {
	t.Helper()
	st, err := tb.Apply()
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	return st
}

// rules returns the "-A ..." lines of a save, without the header.
func rules(save string) []string {
	var out []string
	for _, l := range strings.Split(save, "\n") {
		if strings.HasPrefix(l, "-A ") || strings.HasPrefix(l, ":") {
			out = append(out, l)
		}
	}
	return out
}

var fwdHooks = map[string]string{"FORWARD": "cali-FORWARD", "INPUT": "cali-INPUT"}

func baseChains() []Chain {
	return []Chain{
		{Name: "cali-FORWARD", Rules: []Rule{
			{Match: "-i cali+", Action: "-j cali-from-wl"},
			{Match: "-o cali+", Action: "-j cali-to-wl", Comment: `to "workloads"`},
			{Action: "-j ACCEPT"},
		}},
		{Name: "cali-from-wl", Rules: []Rule{{Match: "-s 10.0.0.1", Action: "-j DROP"}, {Action: "-j RETURN"}}},
		{Name: "cali-to-wl", Rules: []Rule{{Match: "-d 10.0.0.1", Action: "-j DROP"}}},
	}
}

func TestFakeApplyConvergesAndIsIdempotent(t *testing.T) {
	f := newFakeIPT()
	tb := fakeTable(f, "filter", fwdHooks)
	if st := mustApply(t, tb); st.RestoreRan || f.saves != 0 {
		t.Fatalf("Apply before SetChains did I/O: %+v saves=%d", st, f.saves)
	}
	tb.SetChains(baseChains())
	st := mustApply(t, tb)
	if !st.RestoreRan || st.ChainsCreated != 3 || st.RulesWritten != 7 || tb.Dirty() {
		t.Fatalf("first apply: %+v dirty=%v", st, tb.Dirty())
	}
	fwd := f.tables["filter"]["FORWARD"]
	if len(fwd) != 1 || !strings.HasSuffix(fwd[0], "-j cali-FORWARD") {
		t.Fatalf("FORWARD hook: %q", fwd)
	}
	if _, ok := f.tables["filter"]["INPUT"]; !ok || len(f.tables["filter"]["INPUT"]) != 0 {
		t.Fatalf("INPUT hooked to a chain that is not desired: %q", f.tables["filter"]["INPUT"])
	}
	tb.SetChains(baseChains())
	if tb.Dirty() {
		t.Fatal("same desired state marked dirty")
	}
	if st := mustApply(t, tb); st.RestoreRan {
		t.Fatalf("unchanged state ran a restore: %+v", st)
	}
	// A new driver (agent restart) recognises everything by hash.
	tb2 := fakeTable(f, "filter", fwdHooks)
	tb2.SetChains(baseChains())
	if st := mustApply(t, tb2); st.RestoreRan {
		t.Fatalf("restart ran a restore: %+v", st)
	}
}

func TestFakeChangeOneRuleReplacesOnlyIt(t *testing.T) {
	f := newFakeIPT()
	tb := fakeTable(f, "filter", fwdHooks)
	tb.SetChains(baseChains())
	mustApply(t, tb)
	before := slices.Clone(f.tables["filter"]["cali-FORWARD"])
	cs := baseChains()
	cs[0].Rules[1].Match = "-o tap+"
	tb.SetChains(cs)
	st := mustApply(t, tb)
	if st.RulesWritten != 1 || st.RulesDeleted != 0 || st.ChainsCreated != 0 {
		t.Fatalf("stats %+v", st)
	}
	after := f.tables["filter"]["cali-FORWARD"]
	if after[0] != before[0] || after[2] != before[2] || after[1] == before[1] ||
		!strings.Contains(after[1], "-o tap+") {
		t.Fatalf("before %q\nafter %q", before, after)
	}
	// Shorten a chain: surplus rules are deleted from the end.
	cs[1].Rules = cs[1].Rules[:1]
	tb.SetChains(cs)
	if st := mustApply(t, tb); st.RulesDeleted != 1 || st.RulesWritten != 0 {
		t.Fatalf("shorten: %+v", st)
	}
}

func TestFakeStaleChainsAndForeignState(t *testing.T) {
	f := newFakeIPT()
	tb := fakeTable(f, "filter", fwdHooks)
	tb.SetChains(baseChains())
	mustApply(t, tb)
	ft := f.tables["filter"]
	ft["FORWARD"] = append([]string{"-s 192.0.2.1 -j DROP"}, ft["FORWARD"]...) // above our hook
	ft["FOREIGN"] = []string{"-j cali-to-wl", "-j RETURN"}
	ft["cali-FORWARD"] = slices.Delete(ft["cali-FORWARD"], 0, 1) // someone deleted our rule
	tb.InvalidateCache()                                         // the periodic resync

	cs := baseChains()
	cs[0].Rules = cs[0].Rules[2:] // stop using cali-from-wl and cali-to-wl
	tb.SetChains(cs[:1])
	st := mustApply(t, tb)
	ft = f.tables["filter"]
	if _, ok := ft["cali-from-wl"]; ok || st.ChainsDeleted != 1 {
		t.Fatalf("stale chain kept: %+v", st)
	}
	if r, ok := ft["cali-to-wl"]; !ok || len(r) != 0 {
		t.Fatalf("chain referenced by a foreign rule must be flushed and kept: %q %v", r, ok)
	}
	if !slices.Equal(ft["FOREIGN"], []string{"-j cali-to-wl", "-j RETURN"}) {
		t.Fatalf("foreign chain touched: %q", ft["FOREIGN"])
	}
	fwd := ft["FORWARD"]
	if len(fwd) != 2 || !strings.HasSuffix(fwd[0], "-j cali-FORWARD") || fwd[1] != "-s 192.0.2.1 -j DROP" {
		t.Fatalf("hook not first or foreign rule lost: %q", fwd)
	}
	if len(ft["cali-FORWARD"]) != 1 {
		t.Fatalf("cali-FORWARD: %q", ft["cali-FORWARD"])
	}
	if st := mustApply(t, tb); st.RestoreRan {
		t.Fatalf("converged state ran a restore: %+v", st)
	}
	// Duplicate hooks are reduced to one.
	ft["FORWARD"] = append(ft["FORWARD"], ft["FORWARD"][0])
	tb.InvalidateCache()
	if st := mustApply(t, tb); st.RulesDeleted != 2 || st.RulesWritten != 1 || len(f.tables["filter"]["FORWARD"]) != 2 {
		t.Fatalf("duplicate hook: %+v %q", st, f.tables["filter"]["FORWARD"])
	}
}

func TestFakeValidation(t *testing.T) {
	f := newFakeIPT()
	for _, cs := range [][]Chain{
		{{Name: "FORWARD"}},
		{{Name: "cali-this-name-is-far-too-long-for-iptables"}},
		{{Name: "cali-a", Rules: []Rule{{Action: "-j cali-missing"}}}},
		{{Name: "cali-a", Rules: []Rule{{Match: "-s 1.2.3.4\n-j DROP"}}}},
		{{Name: "cali-a"}, {Name: "cali-a"}},
	} {
		tb := fakeTable(f, "filter", nil)
		tb.SetChains(cs)
		if _, err := tb.Apply(); err == nil {
			t.Errorf("%+v: no error", cs)
		}
	}
	if _, err := NewTable("nope", 5, TableOptions{Hooks: map[string]string{"FORWARD": "x"}}).Apply(); err == nil {
		t.Error("bad table options: no error")
	}
	if f.saves+f.restores != 0 {
		t.Errorf("invalid input did I/O")
	}
}

func TestFakeRestoreFailureAndSaveRetry(t *testing.T) {
	f := newFakeIPT()
	f.noWait = true
	tb := fakeTable(f, "filter", fwdHooks)
	f.failSave = 2
	tb.SetChains(baseChains())
	mustApply(t, tb)
	// A stale chain of ours that a foreign chain jumps to: flushed, kept.
	f.tables["filter"]["cali-extra"] = []string{"-j RETURN"}
	f.tables["filter"]["FOREIGN"] = []string{"-j cali-extra"}
	f.failOn = "-j REJECT"
	tb.SetChains(append(baseChains(), Chain{Name: "cali-new", Rules: []Rule{{Action: "-j REJECT"}}}))
	_, err := tb.Apply()
	var re *RestoreError
	if !errors.As(err, &re) || re.Line == 0 || !strings.Contains(re.Input, "-j REJECT") || !tb.Dirty() ||
		f.tables["filter"]["cali-new"] != nil {
		t.Fatalf("want RestoreError naming the line, got %v (dirty=%v)", err, tb.Dirty())
	}
	f.failOn = ""
	tb.SetChains(baseChains())
	st := mustApply(t, tb)
	extra, kept := f.tables["filter"]["cali-extra"]
	if tb.Dirty() || !kept || len(extra) != 0 || st.ChainsDeleted != 0 || f.saves != 5 {
		t.Fatalf("after retry: %+v dirty=%v extra=%q saves=%d", st, tb.Dirty(), extra, f.saves)
	}
}

// TestFakeStateSequence applies a list of desired states in order, reversed
// and shuffled; after each Apply the table must equal what a fresh apply of
// that state gives, and applying again must run no restore.
func TestFakeStateSequence(t *testing.T) {
	b := baseChains()
	states := [][]Chain{
		nil,
		b,
		{b[0], b[1], {Name: "cali-to-wl"}},
		{b[0], b[1], b[2], {Name: "cali-x", Rules: []Rule{{Action: "-j cali-from-wl"}, {Action: "-j DROP"}}}},
		{{Name: "cali-FORWARD", Rules: []Rule{{Action: "-j DROP", Comment: "only"}}}},
		{{Name: "cali-INPUT", Rules: []Rule{{Match: "-p tcp --dport 22", Action: "-j ACCEPT"}}}, b[1]},
	}
	want := make([]string, len(states))
	for i, s := range states {
		f := newFakeIPT()
		tb := fakeTable(f, "filter", fwdHooks)
		tb.SetChains(s)
		mustApply(t, tb)
		want[i] = f.dump("filter")
	}
	order := make([]int, 0, 3*len(states))
	for i := range states {
		order = append(order, i)
	}
	for i := range states {
		order = append(order, len(states)-1-i)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 3 * len(states) {
		order = append(order, rng.IntN(len(states)))
	}
	f := newFakeIPT()
	tb := fakeTable(f, "filter", fwdHooks)
	for _, i := range order {
		tb.SetChains(states[i])
		mustApply(t, tb)
		checkCache(t, tb, f)
		if got := f.dump("filter"); got != want[i] {
			t.Fatalf("state %d:\n got %q\nwant %q", i, rules(got), rules(want[i]))
		}
		if st := mustApply(t, tb); st.RestoreRan {
			t.Fatalf("state %d: second apply ran a restore: %+v", i, st)
		}
	}
}

func TestParseSave(t *testing.T) {
	out := `# Generated by iptables-save v1.8.9 (nf_tables)
*nat
:PREROUTING ACCEPT [0:0]
-A PREROUTING -j DOCKER
COMMIT
*filter
:INPUT ACCEPT [12:345]
:cali-x - [0:0]
[3:180] -A INPUT -m comment --comment "cali:AbC_-1234567890z" -j cali-x
-A cali-x -m comment --comment "not cali:ours" -m comment --comment "a \\ b \"c\" -j x" -g cali-y
-A cali-x -m comment --comment cali:plainHash -j RETURN
COMMIT
`
	st, err := parseSave("filter", []byte(out))
	if err != nil {
		t.Fatal(err)
	}
	in, x := st.chains["INPUT"], st.chains["cali-x"]
	if len(st.chains) != 2 || len(in) != 1 || in[0].hash != "AbC_-1234567890z" || !slices.Equal(in[0].targets, []string{"cali-x"}) {
		t.Fatalf("INPUT: %+v", st.chains)
	}
	if x[0].hash != "" || !slices.Equal(x[0].targets, []string{"cali-y"}) || x[1].hash != "plainHash" {
		t.Fatalf("cali-x: %+v", x)
	}
	if got := splitArgs(`-m comment --comment "a \\ b \"c\"" -j X`); !slices.Equal(got,
		[]string{"-m", "comment", "--comment", `a \ b "c"`, "-j", "X"}) {
		t.Fatalf("splitArgs: %q", got)
	}
	if _, err := parseSave("filter", []byte("*filter\n-Z bogus\nCOMMIT\n")); err == nil {
		t.Fatal("no error for a bogus line")
	}
}
