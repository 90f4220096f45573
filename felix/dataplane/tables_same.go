package dataplane

import (
	"strconv"
	"time"

	"github.com/calico-aio/calico-aio/iptables"
)

// lastChains identifies the chains a table was last given and the
// settings its driver was built with, so that an apply handing the very
// same slice again (the calculation reused: a refresh, a retry, a block or
// interface event) skips rebuilding the chain maps and comparing every
// rule (issue #25: 2,500 chains at 250 endpoints and 1,000 policies).
type lastChains struct {
	first                  *iptables.Chain // &chains[0]; nil for none
	n                      int
	appendHooks            bool
	lockTimeout, lockProbe time.Duration
}

func tableKey(ver int, name string) string { return strconv.Itoa(ver) + "/" + name }

func (d *Dataplane) lastChains(chains []iptables.Chain, appendHooks bool) lastChains {
	l := lastChains{n: len(chains), appendHooks: appendHooks, lockTimeout: d.lockTimeout, lockProbe: d.lockProbe}
	if len(chains) > 0 {
		l.first = &chains[0]
	}
	return l
}

// setChains hands chains to the table's driver, made or remade as needed
// (table), unless it was last given exactly these (the same slice) with
// the same settings; set says whether SetChains ran.
func (d *Dataplane) setChains(ver int, name string, chains []iptables.Chain, appendHooks bool) (t *iptables.Table, set bool) {
	want := d.lastChains(chains, appendHooks)
	if st := d.tables[tableKey(ver, name)]; st != nil && want.first != nil && st.last == want {
		return st.t, false
	}
	t = d.table(ver, name, chains, appendHooks)
	t.SetChains(chains)
	d.tables[tableKey(ver, name)].last = want
	return t, true
}
