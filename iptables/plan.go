package iptables

import (
	"maps"
	"slices"
	"strconv"
	"strings"
)

// plan computes the iptables-restore lines (without the "*table" header and
// COMMIT) that take kernel to the desired state, in an order that is valid
// inside one transaction:
//
//  1. declare chains that do not exist yet (":cali-X - [0:0]"; never for an
//     existing chain, as restore would flush it);
//  2. bring each desired chain's rules in line (alignChain): rules whose
//     hash is still wanted stay, in place; new rules are inserted (-I) at
//     their position or appended, unwanted ones deleted (-D), and a rule
//     whose content changed where nothing else moved is replaced (-R);
//  3. repair hooks: when a built-in chain's rules carrying our hash are not
//     exactly the one desired hook in first position (last with
//     AppendHooks), delete them all by their saved spec (never by
//     position: that could hit a foreign rule) and insert the hook at
//     position 1 (append it);
//  4. flush every stale chain of ours, then delete them (stale chains may
//     jump to each other). A stale chain still referenced by a foreign rule
//     is only flushed; deleting it would fail the whole transaction.
//
// k is the kernel's table, read back or cached. With only set, k is the
// cache of a successful Apply that left every other chain as desired:
// steps 1, 2 and 4 look at those chains alone. plan also returns what a
// successful restore of the lines does to k, to keep the cache current.
func (t *Table) plan(k *savedTable, only map[string]bool) ([]string, tableUpdate, ApplyStats) {
	var lines []string
	var st ApplyStats
	upd := tableUpdate{set: map[string][]savedRule{}}
	var names []string
	if only == nil {
		names = slices.Sorted(maps.Keys(t.desired))
	} else {
		for name := range only {
			if _, ok := t.desired[name]; ok {
				names = append(names, name)
			}
		}
		slices.Sort(names)
	}

	for _, name := range names {
		if _, ok := k.chains[name]; !ok {
			lines = append(lines, ":"+name+" - [0:0]")
			st.ChainsCreated++
			upd.set[name] = nil
		}
	}

	for _, name := range names {
		before := len(lines)
		d := t.desired[name]
		lines = alignChain(lines, &st, name, k.chains[name], d.hashes, d.Rules)
		if len(lines) > before {
			upd.set[name] = t.savedRulesReusing(name, k.chains[name])
		}
	}

	for _, b := range builtinChains[t.table] {
		var ours []savedRule
		for _, r := range k.chains[b] {
			if r.hash != "" {
				ours = append(ours, r)
			}
		}
		hook, hash, wanted := t.hook(b)
		rules := k.chains[b]
		at := 0 // where the hook belongs: first, or last with AppendHooks
		if t.appendHooks {
			at = len(rules) - 1
		}
		if (wanted && len(ours) == 1 && rules[at].hash == hash) || (!wanted && len(ours) == 0) {
			continue
		}
		var after []savedRule
		for _, r := range ours {
			lines = append(lines, "-D "+b+" "+r.spec)
			st.RulesDeleted++
		}
		for _, r := range rules {
			if r.hash == "" {
				after = append(after, r)
			}
		}
		if wanted {
			h := parseRule(ruleSpec(hash, hook))
			if t.appendHooks {
				lines = append(lines, renderRule("-A", b, 0, hash, hook))
				after = append(after, h)
			} else {
				lines = append(lines, renderRule("-I", b, 1, hash, hook))
				after = append([]savedRule{h}, after...)
			}
			st.RulesWritten++
		}
		upd.set[b] = after
	}

	stale := t.staleChains(k, only)
	var deletes []string
	for _, name := range stale {
		if len(k.chains[name]) > 0 {
			lines = append(lines, "-F "+name)
			upd.set[name] = nil
		}
		if !referencedByForeign(k, name) {
			deletes = append(deletes, "-X "+name)
			st.ChainsDeleted++
			upd.del = append(upd.del, name)
		} else {
			upd.kept = append(upd.kept, name)
		}
	}
	return append(lines, deletes...), upd, st
}

// tableUpdate is what a successful restore of plan's lines does to the
// table: the rules of every chain it created or changed (nil: empty), and
// the chains it deleted.
type tableUpdate struct {
	set map[string][]savedRule
	del []string
	// kept: stale chains only flushed (a foreign rule jumps to them), to
	// be tried again by the next plan.
	kept []string
}

// applyTo brings k to the state the restore left the kernel in.
func (u tableUpdate) applyTo(k *savedTable) {
	for name, rules := range u.set {
		k.chains[name] = rules
	}
	for _, name := range u.del {
		delete(k.chains, name)
	}
}

// savedRules returns desired chain name as the restore writes it: each
// rule's spec exactly as rendered, with its hash and targets.
func (t *Table) savedRules(name string) []savedRule {
	d := t.desired[name]
	rules, hashes := d.Rules, d.hashes
	out := make([]savedRule, len(rules))
	for i, r := range rules {
		out[i] = parseRule(ruleSpec(hashes[i], r))
	}
	return out
}

// savedRulesReusing is savedRules, taking each rule that the kernel's
// chain have already holds (the same hash: the same chain, rule and
// neighbour) from have instead of rendering and parsing it again: a
// dispatch chain changed by one endpoint keeps every other rule.
func (t *Table) savedRulesReusing(name string, have []savedRule) []savedRule {
	if len(have) == 0 {
		return t.savedRules(name)
	}
	byHash := make(map[string]savedRule, len(have))
	for _, r := range have {
		if r.hash != "" {
			byHash[r.hash] = r
		}
	}
	d := t.desired[name]
	rules, hashes := d.Rules, d.hashes
	out := make([]savedRule, len(rules))
	for i, r := range rules {
		if kr, ok := byHash[hashes[i]]; ok {
			out[i] = kr
			continue
		}
		out[i] = parseRule(ruleSpec(hashes[i], r))
	}
	return out
}

// hook returns the hook rule desired first in built-in chain b and its hash.
func (t *Table) hook(b string) (Rule, string, bool) {
	target, ok := t.hooks[b]
	if !ok {
		return Rule{}, "", false
	}
	if _, ok := t.desired[target]; !ok {
		return Rule{}, "", false
	}
	r := Rule{Action: "-j " + target}
	return r, ruleHash(b, Rule{}, 0, r), true
}

// staleChains lists, sorted, the chains of ours the kernel has but that are
// no longer desired (of those in only, when set).
func (t *Table) staleChains(k *savedTable, only map[string]bool) []string {
	var stale []string
	consider := func(name string) {
		if _, ok := t.desired[name]; !ok && strings.HasPrefix(name, ChainPrefix) {
			stale = append(stale, name)
		}
	}
	if only == nil {
		for name := range k.chains {
			consider(name)
		}
	}
	for name := range only {
		if _, ok := k.chains[name]; ok {
			consider(name)
		}
	}
	slices.Sort(stale)
	return stale
}

// referencedByForeign reports whether a rule that is not ours (outside our
// chains and without our hash) jumps to chain.
func referencedByForeign(k *savedTable, chain string) bool {
	for name, rules := range k.chains {
		if strings.HasPrefix(name, ChainPrefix) {
			continue
		}
		for _, r := range rules {
			if r.hash == "" && slices.Contains(r.targets, chain) {
				return true
			}
		}
	}
	return false
}

// alignChain appends the lines that turn the kernel's rules have of chain
// into the desired rules (with their hashes want, distinct within the
// chain), in restore order: positions are those of the chain as edited by
// the lines before. Walking the desired rules in order, a kernel rule that
// is wanted later stays where it is; one that is not wanted at all (or
// carries no hash of ours) goes; a missing desired rule is inserted at its
// position, or replaces in place a kernel rule that goes anyway.
func alignChain(lines []string, st *ApplyStats, chain string, have []savedRule, want []string, rules []Rule) []string {
	if alignedAlready(have, want) {
		return lines // the usual case: every chain but the changed ones
	}
	wantAt := make(map[string]int, len(want))
	for i, h := range want {
		wantAt[h] = i
	}
	cur := make([]string, len(have))
	inCur := make(map[string]bool, len(have))
	for i, r := range have {
		cur[i] = r.hash
		if r.hash != "" {
			inCur[r.hash] = true
		}
	}
	// unwanted reports whether the kernel rule at position i goes: no hash
	// of ours, not desired, or desired at an earlier position (a duplicate).
	unwanted := func(i int) bool {
		at, ok := wantAt[cur[i]]
		return cur[i] == "" || !ok || at < i
	}
	for i, h := range want {
		for i < len(cur) && cur[i] != h && unwanted(i) && inCur[h] {
			lines = append(lines, "-D "+chain+" "+strconv.Itoa(i+1))
			st.RulesDeleted++
			cur = slices.Delete(cur, i, i+1)
		}
		switch {
		case i < len(cur) && cur[i] == h:
			continue
		case i >= len(cur):
			lines = append(lines, renderRule("-A", chain, 0, h, rules[i]))
			cur = append(cur, h)
		case unwanted(i):
			lines = append(lines, renderRule("-R", chain, i+1, h, rules[i]))
			cur[i] = h
		default:
			lines = append(lines, renderRule("-I", chain, i+1, h, rules[i]))
			cur = slices.Insert(cur, i, h)
		}
		inCur[h] = true
		st.RulesWritten++
	}
	for pos := len(cur); pos > len(want); pos-- {
		lines = append(lines, "-D "+chain+" "+strconv.Itoa(pos))
		st.RulesDeleted++
	}
	return lines
}

// alignedAlready reports whether the kernel's rules are exactly the
// desired ones, in order: then alignChain has nothing to write, and needs
// none of its maps (issue #25: each apply plans every chain of the table,
// hundreds at 250 pods, of which a pod's event changes a few).
func alignedAlready(have []savedRule, want []string) bool {
	if len(have) != len(want) {
		return false
	}
	for i, r := range have {
		if r.hash != want[i] {
			return false
		}
	}
	return true
}
