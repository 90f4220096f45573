package iptables

import (
	"fmt"
	"math/rand"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// replay runs alignChain's lines on a chain of hashes as iptables-restore
// would (positions 1-based, each line on the chain the earlier ones left).
func replay(t *testing.T, chain []string, lines []string) []string {
	t.Helper()
	hashOf := func(l string) string {
		i := strings.Index(l, HashPrefix)
		return l[i+len(HashPrefix) : i+len(HashPrefix)+hashLen]
	}
	out := slices.Clone(chain)
	for _, l := range lines {
		f := strings.Fields(l)
		switch f[0] {
		case "-A":
			out = append(out, hashOf(l))
		case "-I", "-R", "-D":
			pos, err := strconv.Atoi(f[2])
			if err != nil || pos < 1 || pos > len(out)+1 || (f[0] != "-I" && pos > len(out)) {
				t.Fatalf("line %q: bad position for a chain of %d rules", l, len(out))
			}
			switch f[0] {
			case "-I":
				out = slices.Insert(out, pos-1, hashOf(l))
			case "-R":
				out[pos-1] = hashOf(l)
			case "-D":
				out = slices.Delete(out, pos-1, pos)
			}
		}
	}
	return out
}

func chainOf(n int, ids ...int) (Chain, []string) {
	c := Chain{Name: "cali-x"}
	for _, id := range ids {
		c.Rules = append(c.Rules, Rule{Match: "-s 10.0.0." + strconv.Itoa(id), Action: "-j ACCEPT"})
	}
	return c, chainHashes(c)
}

// alignChain turns any kernel chain into the desired one; inserting,
// removing or changing one rule costs one line, whatever follows it.
func TestAlignChain(t *testing.T) {
	saved := func(hs []string) []savedRule {
		out := make([]savedRule, len(hs))
		for i, h := range hs {
			out[i] = savedRule{hash: h}
		}
		return out
	}
	run := func(have []string, want Chain, wantHashes []string) ([]string, ApplyStats) {
		var st ApplyStats
		lines := alignChain(nil, &st, want.Name, saved(have), wantHashes, want.Rules)
		if got := replay(t, have, lines); !slices.Equal(got, wantHashes) {
			t.Fatalf("have %v want %v: lines %q give %v", have, wantHashes, lines, got)
		}
		return lines, st
	}

	_, old := chainOf(0, 1, 2, 3, 4, 5, 6, 7, 8)
	for _, c := range []struct {
		name  string
		ids   []int
		lines int
	}{
		{"insert first", []int{0, 1, 2, 3, 4, 5, 6, 7, 8}, 1},
		{"insert middle", []int{1, 2, 3, 4, 42, 5, 6, 7, 8}, 1},
		{"remove middle", []int{1, 2, 3, 5, 6, 7, 8}, 1},
		{"change one", []int{1, 2, 3, 44, 5, 6, 7, 8}, 1},
		{"append", []int{1, 2, 3, 4, 5, 6, 7, 8, 9}, 1},
		{"same", []int{1, 2, 3, 4, 5, 6, 7, 8}, 0},
	} {
		want, wh := chainOf(0, c.ids...)
		if lines, _ := run(old, want, wh); len(lines) != c.lines {
			t.Errorf("%s: %d lines %q, want %d", c.name, len(lines), lines, c.lines)
		}
	}
	// Policy jumps each followed by the same "return if accepted" rule: a
	// new policy ahead of them costs its two rules, and the returns after
	// the old jumps keep their hashes (and so their packet counters).
	tier := func(jumps ...string) Chain {
		c := Chain{Name: "cali-tw-x"}
		for _, j := range jumps {
			c.Rules = append(c.Rules, Rule{Action: "-j cali-pi-" + j}, Rule{Match: "-m mark --mark 0x10/0x10", Action: "-j RETURN", Comment: "Return if policy accepted"})
		}
		return c
	}
	before, after := chainHashes(tier("b", "c")), tier("a", "b", "c")
	afterHashes := chainHashes(after)
	if lines, _ := run(before, after, afterHashes); len(lines) != 2 || !slices.Equal(afterHashes[2:], before) {
		t.Errorf("new policy ahead: lines %q; kept rules' hashes %v, were %v", lines, afterHashes[2:], before)
	}

	// Identical rules get distinct hashes, so duplicates align too.
	dup, dh := chainOf(0, 1, 1, 2, 1)
	if len(slices.Compact(slices.Sorted(slices.Values(dh)))) != 4 {
		t.Fatalf("hashes of identical rules collide: %v", dh)
	}
	run([]string{dh[0], "", dh[3], dh[2], dh[2]}, dup, dh)

	// Random kernel states (foreign rules "", duplicates, strangers) and
	// random desired chains always converge.
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 2000; i++ {
		ids := make([]int, rng.Intn(9))
		for j := range ids {
			ids[j] = rng.Intn(6)
		}
		want, wh := chainOf(0, ids...)
		pool := append(slices.Clone(wh), "", "strangerAAAAAAAA", old[0])
		have := make([]string, rng.Intn(10))
		for j := range have {
			have[j] = pool[rng.Intn(len(pool))]
		}
		t.Run(fmt.Sprint(i), func(t *testing.T) { run(have, want, wh) })
	}
}
