// Package iptables programs iptables tables and ipsets: desired state in,
// minimal atomic changes out. It knows nothing of Calico's semantics.
package iptables

// Rule is one rule of a chain: match criteria and an action, as iptables
// arguments (e.g. Match "-p tcp --dport 80", Action "-j ACCEPT"). The
// driver adds a "-m comment --comment cali:<hash>" tag that identifies it.
type Rule struct {
	Match   string
	Action  string
	Comment string // optional human comment, kept next to the hash
}

// Chain is a whole chain as desired: its name (must start with "cali-")
// and its rules in order.
type Chain struct {
	Name  string
	Rules []Rule
}
