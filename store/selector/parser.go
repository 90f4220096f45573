package selector

import (
	"fmt"
	"slices"
)

const (
	// MaxLength is the longest selector, in bytes, that Parse accepts.
	MaxLength = 64 << 10
	// MaxDepth bounds the nesting of parentheses and negations, so that parsing and
	// evaluation cannot exhaust the stack.
	MaxDepth = 100
)

// parser is a recursive-descent parser over the token list:
//
//	expr    = and { "||" and }
//	and     = unary { "&&" unary }
//	unary   = "!" unary | primary
//	primary = "(" expr ")" | "all(" ")" | "global(" ")" | "has(" key ")"
//	        | key ("==" | "!=" | "contains" | starts | ends) string
//	        | key ("in" | not) "{" [ string { "," string } [","] ] "}"
//	starts  = "starts" "with" | "startswith"
//	ends    = "ends" "with" | "endswith"
//	not     = "not" "in" | "notin"
//
// As in Calico, a function name is written against its "(" ("has (a)" is an error), the
// two-word operators may also be written as one word, and a set may end with a comma.
type parser struct {
	in    string
	toks  []token
	i     int
	depth int
}

func parse(in string) (node, *ParseError) {
	if len(in) > MaxLength {
		return nil, &ParseError{Pos: MaxLength, Input: in,
			Msg: fmt.Sprintf("selector is longer than %d bytes", MaxLength)}
	}
	toks, err := lex(in)
	if err != nil {
		return nil, err
	}
	if toks[0].kind == tokEOF {
		return allNode{}, nil
	}
	p := &parser{in: in, toks: toks}
	n, err := p.expr()
	if err != nil {
		return nil, err
	}
	if t := p.peek(); t.kind != tokEOF {
		return nil, p.errorf(t, "expected \"&&\", \"||\" or end of selector but found %s", t.describe())
	}
	return n, nil
}

func (p *parser) peek() token { return p.toks[p.i] }

func (p *parser) next() token {
	t := p.toks[p.i]
	if t.kind != tokEOF {
		p.i++
	}
	return t
}

func (p *parser) errorf(t token, format string, args ...any) *ParseError {
	return &ParseError{Pos: t.pos, Input: p.in, Msg: fmt.Sprintf(format, args...)}
}

// expect consumes a token of the given kind or reports what was found instead.
func (p *parser) expect(kind tokKind) *ParseError {
	if t := p.next(); t.kind != kind {
		return p.errorf(t, "expected %q but found %s", punctText[kind], t.describe())
	}
	return nil
}

// enter guards recursion through parentheses and negation.
func (p *parser) enter(t token) *ParseError {
	p.depth++
	if p.depth > MaxDepth {
		return p.errorf(t, "selector nested more than %d levels deep", MaxDepth)
	}
	return nil
}

func (p *parser) expr() (node, *ParseError) {
	var xs []node
	for {
		n, err := p.and()
		if err != nil {
			return nil, err
		}
		if o, ok := n.(orNode); ok {
			xs = append(xs, o.xs...) // a || (b || c) is a || b || c
		} else {
			xs = append(xs, n)
		}
		if p.peek().kind != tokOr {
			break
		}
		p.next()
	}
	if len(xs) == 1 {
		return xs[0], nil
	}
	return orNode{xs: xs}, nil
}

func (p *parser) and() (node, *ParseError) {
	var xs []node
	for {
		n, err := p.unary()
		if err != nil {
			return nil, err
		}
		if a, ok := n.(andNode); ok {
			xs = append(xs, a.xs...) // a && (b && c) is a && b && c
		} else {
			xs = append(xs, n)
		}
		if p.peek().kind != tokAnd {
			break
		}
		p.next()
	}
	if len(xs) == 1 {
		return xs[0], nil
	}
	return andNode{xs: xs}, nil
}

func (p *parser) unary() (node, *ParseError) {
	t := p.peek()
	switch t.kind {
	case tokNot:
		p.next()
		if err := p.enter(t); err != nil {
			return nil, err
		}
		x, err := p.unary()
		if err != nil {
			return nil, err
		}
		p.depth--
		return notNode{x: x}, nil
	case tokLParen:
		p.next()
		if err := p.enter(t); err != nil {
			return nil, err
		}
		x, err := p.expr()
		if err != nil {
			return nil, err
		}
		if c := p.next(); c.kind != tokRParen {
			return nil, p.errorf(c, "expected \")\" to close \"(\" at position %d but found %s",
				t.pos, c.describe())
		}
		p.depth--
		return x, nil
	case tokIdent:
		return p.term()
	}
	return nil, p.errorf(t, "expected a label, has(), all(), global(), \"!\" or \"(\" but found %s",
		t.describe())
}

// term parses a function call or a comparison starting with the identifier at the cursor.
func (p *parser) term() (node, *ParseError) {
	key := p.next()
	if p.peek().kind == tokLParen {
		return p.call(key)
	}
	op := p.next()
	switch op.kind {
	case tokIdent:
		return p.wordOp(key, op)
	case tokEq, tokNe:
		v, err := p.str()
		if err != nil {
			return nil, err
		}
		if op.kind == tokEq {
			return cmpNode{op: opEq, key: key.text, value: v}, nil
		}
		return cmpNode{op: opNe, key: key.text, value: v}, nil
	}
	return nil, p.noOperator(key, op)
}

// noOperator reports that op, found after label key, is not an operator.
func (p *parser) noOperator(key, op token) *ParseError {
	return p.errorf(op, "expected an operator (==, !=, in, not in, contains, starts with, "+
		"ends with) after label %q but found %s", key.text, op.describe())
}

// wordOp parses the rest of a comparison whose operator is a word: in, not in, contains,
// starts with, ends with, or the one-word spellings notin, startswith and endswith.
func (p *parser) wordOp(key, op token) (node, *ParseError) {
	// second consumes the "in" or "with" of a two-word operator.
	second := func(want string) *ParseError {
		if t := p.next(); t.kind != tokIdent || t.text != want {
			return p.errorf(t, "expected %q after %q but found %s", want, op.text, t.describe())
		}
		return nil
	}
	var cmp cmpOp
	switch op.text {
	case "in":
		return p.set(key.text, false)
	case "notin":
		return p.set(key.text, true)
	case "not":
		if err := second("in"); err != nil {
			return nil, err
		}
		return p.set(key.text, true)
	case "contains":
		cmp = opContains
	case "startswith":
		cmp = opStartsWith
	case "endswith":
		cmp = opEndsWith
	case "starts", "ends":
		if err := second("with"); err != nil {
			return nil, err
		}
		cmp = opStartsWith
		if op.text == "ends" {
			cmp = opEndsWith
		}
	default:
		return nil, p.noOperator(key, op)
	}
	v, err := p.str()
	if err != nil {
		return nil, err
	}
	return cmpNode{op: cmp, key: key.text, value: v}, nil
}

// call parses all(), global() and has(key); the name token is already consumed.
func (p *parser) call(name token) (node, *ParseError) {
	switch name.text {
	case "all", "global", "has":
		if lp := p.peek(); lp.pos != name.pos+len(name.text) {
			return nil, p.errorf(lp, "unexpected space between %q and \"(\"", name.text)
		}
	}
	switch name.text {
	case "all", "global":
		p.next()
		if err := p.expect(tokRParen); err != nil {
			return nil, err
		}
		if name.text == "all" {
			return allNode{}, nil
		}
		return globalNode{}, nil
	case "has":
		p.next()
		k := p.next()
		if k.kind != tokIdent {
			return nil, p.errorf(k, "expected a label key but found %s", k.describe())
		}
		if err := p.expect(tokRParen); err != nil {
			return nil, err
		}
		return hasNode{key: k.text}, nil
	}
	return nil, p.errorf(name, "unknown function %q (expected has(), all() or global())", name.text)
}

func (p *parser) str() (string, *ParseError) {
	t := p.next()
	if t.kind != tokString {
		return "", p.errorf(t, "expected a quoted string but found %s", t.describe())
	}
	return t.text, nil
}

// set parses `{ "a", "b" }` after `in` / `not in`.
func (p *parser) set(key string, not bool) (node, *ParseError) {
	if err := p.expect(tokLBrace); err != nil {
		return nil, err
	}
	var vs []string
	if p.peek().kind == tokRBrace {
		p.next()
		return setNode{key: key, not: not}, nil
	}
	for {
		v, err := p.str()
		if err != nil {
			return nil, err
		}
		vs = append(vs, v)
		t := p.next()
		if t.kind == tokRBrace {
			break
		}
		if t.kind != tokComma {
			return nil, p.errorf(t, "expected \",\" or \"}\" but found %s", t.describe())
		}
		if p.peek().kind == tokRBrace { // a trailing comma, as Calico allows
			p.next()
			break
		}
	}
	slices.Sort(vs)
	return setNode{key: key, values: slices.Compact(vs), not: not}, nil
}
