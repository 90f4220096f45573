package selector

import (
	"slices"
	"strings"
)

// NamespaceLabel is the label Calico attaches to namespaced resources. global() matches
// label sets that do not carry it.
const NamespaceLabel = "projectcalico.org/namespace"

// node is one term of a parsed selector.
type node interface {
	eval(l Labels) bool
	// write appends the canonical text of the node.
	write(b *strings.Builder)
}

// cmpOp is a binary label/value comparison.
type cmpOp int

const (
	opEq cmpOp = iota
	opNe
	opContains
	opStartsWith
	opEndsWith
)

var cmpOpText = [...]string{
	opEq: " == ", opNe: " != ", opContains: " contains ",
	opStartsWith: " starts with ", opEndsWith: " ends with ",
}

type allNode struct{}
type globalNode struct{}
type hasNode struct{ key string }
type notNode struct{ x node }
type andNode struct{ xs []node }
type orNode struct{ xs []node }

type cmpNode struct {
	op    cmpOp
	key   string
	value string
}

// setNode is `key in {...}` or, with not set, `key not in {...}`. values are sorted and
// de-duplicated.
type setNode struct {
	key    string
	values []string
	not    bool
}

func (allNode) eval(Labels) bool { return true }

func (globalNode) eval(l Labels) bool {
	_, ok := l.Get(NamespaceLabel)
	return !ok
}

func (n hasNode) eval(l Labels) bool {
	_, ok := l.Get(n.key)
	return ok
}

func (n notNode) eval(l Labels) bool { return !n.x.eval(l) }

func (n andNode) eval(l Labels) bool {
	for _, x := range n.xs {
		if !x.eval(l) {
			return false
		}
	}
	return true
}

func (n orNode) eval(l Labels) bool {
	for _, x := range n.xs {
		if x.eval(l) {
			return true
		}
	}
	return false
}

func (n cmpNode) eval(l Labels) bool {
	v, ok := l.Get(n.key)
	switch n.op {
	case opEq:
		return ok && v == n.value
	case opNe:
		return !ok || v != n.value
	case opContains:
		return ok && strings.Contains(v, n.value)
	case opStartsWith:
		return ok && strings.HasPrefix(v, n.value)
	case opEndsWith:
		return ok && strings.HasSuffix(v, n.value)
	}
	return false
}

func (n setNode) eval(l Labels) bool {
	v, ok := l.Get(n.key)
	if !ok {
		return n.not
	}
	_, found := slices.BinarySearch(n.values, v)
	return found != n.not
}

func (allNode) write(b *strings.Builder)    { b.WriteString("all()") }
func (globalNode) write(b *strings.Builder) { b.WriteString("global()") }

func (n hasNode) write(b *strings.Builder) {
	b.WriteString("has(")
	b.WriteString(n.key)
	b.WriteString(")")
}

// write parenthesises only && and || operands: !has(a), !a == "b", !(a && b). ! binds to
// the next term, so no other parentheses are needed, and the canonical form is never nested
// deeper than the input it came from (which keeps it within MaxDepth).
func (n notNode) write(b *strings.Builder) {
	b.WriteString("!")
	switch n.x.(type) {
	case andNode, orNode:
		b.WriteString("(")
		n.x.write(b)
		b.WriteString(")")
	default:
		n.x.write(b)
	}
}

func (n andNode) write(b *strings.Builder) {
	for i, x := range n.xs {
		if i > 0 {
			b.WriteString(" && ")
		}
		if _, isOr := x.(orNode); isOr {
			b.WriteString("(")
			x.write(b)
			b.WriteString(")")
		} else {
			x.write(b)
		}
	}
}

func (n orNode) write(b *strings.Builder) {
	for i, x := range n.xs {
		if i > 0 {
			b.WriteString(" || ")
		}
		x.write(b)
	}
}

func (n cmpNode) write(b *strings.Builder) {
	b.WriteString(n.key)
	b.WriteString(cmpOpText[n.op])
	writeQuoted(b, n.value)
}

func (n setNode) write(b *strings.Builder) {
	b.WriteString(n.key)
	if n.not {
		b.WriteString(" not in {")
	} else {
		b.WriteString(" in {")
	}
	for i, v := range n.values {
		if i > 0 {
			b.WriteString(", ")
		}
		writeQuoted(b, v)
	}
	b.WriteString("}")
}

// writeQuoted writes v in double quotes, or in single quotes when v contains a double quote.
// The language has no escapes, so no parsed value contains both kinds.
func writeQuoted(b *strings.Builder, v string) {
	q := byte('"')
	if strings.IndexByte(v, '"') >= 0 {
		q = '\''
	}
	b.WriteByte(q)
	b.WriteString(v)
	b.WriteByte(q)
}
