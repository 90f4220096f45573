package dataplane

import (
	"slices"
	"testing"
	"time"

	"github.com/calico-aio/calico-aio/iptables"
)

// TestSetChainsSkipsTheSameSlice: the very same chain slice given again
// (the agent's calculation reused) skips SetChains; a copy, other lock
// settings, another insert mode or a table emptied by a backend switch
// that failed are set again. No I/O: nothing is applied.
func TestSetChainsSkipsTheSameSlice(t *testing.T) {
	d := New(Config{})
	chains := []iptables.Chain{{Name: "cali-FORWARD", Rules: []iptables.Rule{{Action: "-j ACCEPT"}}}}
	steps := []struct {
		what   string
		do     func()
		chains []iptables.Chain
		append bool
		want   bool
	}{
		{what: "first", chains: chains, want: true},
		{what: "the same slice", chains: chains, want: false},
		{what: "a copy", chains: slices.Clone(chains), want: true},
		{what: "the copy again", want: false},
		{what: "append mode", append: true, want: true},
		{what: "another lock timeout", do: func() { d.lockTimeout = time.Second }, want: true},
		{what: "emptied by a backend switch", do: func() {
			st := d.tables["4/filter"]
			st.t.SetChains(nil)
			st.last = lastChains{}
		}, want: true},
		{what: "no chains", chains: []iptables.Chain{}, want: true},
		{what: "no chains again", want: true},
	}
	var last []iptables.Chain
	for _, s := range steps {
		if s.do != nil {
			s.do()
		}
		if s.chains != nil {
			last = s.chains
		}
		if _, set := d.setChains(4, "filter", last, s.append); set != s.want {
			t.Errorf("%s: SetChains ran %v, want %v", s.what, set, s.want)
		}
	}
}
