package controller

import "time"

// candidates remembers since when each piece of suspected garbage has been
// seen orphaned. It is pure bookkeeping: no I/O.
type candidates map[string]time.Time

// observe records the orphans seen now: new ones start their grace
// period, ones no longer seen are forgotten (an orphan that went away, or
// whose owner came back, starts over if it is seen again). It returns the
// orphans seen for at least grace, in the order of orphans.
func (cs *candidates) observe(orphans []string, now time.Time, grace time.Duration) []string {
	if *cs == nil {
		*cs = candidates{}
	}
	seen := make(map[string]bool, len(orphans))
	var due []string
	for _, k := range orphans {
		if seen[k] {
			continue
		}
		seen[k] = true
		first, ok := (*cs)[k]
		if !ok {
			(*cs)[k] = now
			first = now
		}
		if now.Sub(first) >= grace {
			due = append(due, k)
		}
	}
	for k := range *cs {
		if !seen[k] {
			delete(*cs, k)
		}
	}
	return due
}

// since is when k was first seen orphaned.
func (cs candidates) since(k string) time.Time { return cs[k] }

// forget drops k (its owner is back, or it was released).
func (cs candidates) forget(k string) { delete(cs, k) }
