package dataplane

// TableCount is how many of our chains and rules one table holds when
// desired is programmed: the chains, their rules, and the hook rule each
// hooked built-in chain gets.
type TableCount struct {
	IPVersion     int
	Table         string
	Chains, Rules int
}

// TableCounts counts desired's chains and rules per table, for the tables
// Apply programs (IPv6 ones only when the dataplane has IPv6), in order
// of version then table name.
func (d *Dataplane) TableCounts(des Desired) []TableCount {
	var out []TableCount
	for _, ver := range []int{4, 6} {
		if ver == 6 && !d.ipv6 {
			continue
		}
		for _, name := range []string{"filter", "mangle", "nat", "raw"} {
			chains := des.Tables[ver][name]
			c := TableCount{IPVersion: ver, Table: name, Chains: len(chains)}
			for _, ch := range chains {
				c.Rules += len(ch.Rules)
				for _, ours := range builtinHooks[name] {
					if ours == ch.Name {
						c.Rules++ // the hook rule jumping to it
					}
				}
			}
			out = append(out, c)
		}
	}
	return out
}
