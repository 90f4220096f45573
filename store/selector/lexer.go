package selector

import "fmt"

// tokKind identifies a lexical token. Words such as "in", "not", "contains" and the function
// names are all lexed as tokIdent; the parser decides from context whether a word is a label
// key or an operator, so labels may be called "in", "has" or "all" without ambiguity.
type tokKind int

const (
	tokEOF    tokKind = iota
	tokIdent          // label key or keyword: 1 to MaxLabelLength of [A-Za-z0-9._/-]
	tokString         // quoted value; text holds the unquoted contents
	tokLParen         // (
	tokRParen         // )
	tokLBrace         // {
	tokRBrace         // }
	tokComma          // ,
	tokEq             // ==
	tokNe             // !=
	tokNot            // !
	tokAnd            // &&
	tokOr             // ||
)

type token struct {
	kind tokKind
	pos  int    // byte offset of the token's first character in the input
	text string // identifier text or unquoted string contents
}

// describe names a token for error messages.
func (t token) describe() string {
	switch t.kind {
	case tokEOF:
		return "end of selector"
	case tokIdent:
		return fmt.Sprintf("%q", t.text)
	case tokString:
		return "quoted string"
	}
	return fmt.Sprintf("%q", punctText[t.kind])
}

var punctText = map[tokKind]string{
	tokLParen: "(", tokRParen: ")", tokLBrace: "{", tokRBrace: "}", tokComma: ",",
	tokEq: "==", tokNe: "!=", tokNot: "!", tokAnd: "&&", tokOr: "||",
}

// MaxLabelLength is the longest label key, in bytes, that Calico's selector language allows.
const MaxLabelLength = 512

// isSpace reports whether c separates tokens. Like Calico, only spaces and tabs do: a line
// break in a selector is an error.
func isSpace(c byte) bool {
	return c == ' ' || c == '\t'
}

// isKeyChar reports whether c may appear in a label key (or keyword). Any of them may come
// first, so "_a", "-a" and ".a" are keys too, as in Calico.
func isKeyChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '.' || c == '_' || c == '/' || c == '-'
}

// lex splits the input into tokens, always ending with a tokEOF token.
func lex(in string) ([]token, *ParseError) {
	var toks []token
	i := 0
	for {
		for i < len(in) && isSpace(in[i]) {
			i++
		}
		if i == len(in) {
			return append(toks, token{kind: tokEOF, pos: i}), nil
		}
		start, c := i, in[i]
		two := ""
		if i+1 < len(in) {
			two = in[i : i+2]
		}
		switch {
		case isKeyChar(c):
			for i < len(in) && isKeyChar(in[i]) {
				i++
			}
			if n := i - start; n > MaxLabelLength {
				return nil, &ParseError{Pos: start, Input: in, Msg: fmt.Sprintf(
					"label key %.20q... is %d characters long, more than the %d allowed",
					in[start:i], n, MaxLabelLength)}
			}
			toks = append(toks, token{kind: tokIdent, pos: start, text: in[start:i]})
			continue
		case c == '"' || c == '\'':
			end := i + 1
			for end < len(in) && in[end] != c {
				end++
			}
			if end == len(in) {
				return nil, &ParseError{Pos: start, Input: in,
					Msg: fmt.Sprintf("unterminated string (missing closing %c)", c)}
			}
			toks = append(toks, token{kind: tokString, pos: start, text: in[i+1 : end]})
			i = end + 1
			continue
		case two == "==":
			toks, i = append(toks, token{kind: tokEq, pos: start}), i+2
		case two == "!=":
			toks, i = append(toks, token{kind: tokNe, pos: start}), i+2
		case two == "&&":
			toks, i = append(toks, token{kind: tokAnd, pos: start}), i+2
		case two == "||":
			toks, i = append(toks, token{kind: tokOr, pos: start}), i+2
		case c == '!':
			toks, i = append(toks, token{kind: tokNot, pos: start}), i+1
		case c == '(':
			toks, i = append(toks, token{kind: tokLParen, pos: start}), i+1
		case c == ')':
			toks, i = append(toks, token{kind: tokRParen, pos: start}), i+1
		case c == '{':
			toks, i = append(toks, token{kind: tokLBrace, pos: start}), i+1
		case c == '}':
			toks, i = append(toks, token{kind: tokRBrace, pos: start}), i+1
		case c == ',':
			toks, i = append(toks, token{kind: tokComma, pos: start}), i+1
		default:
			return nil, &ParseError{Pos: start, Input: in, Msg: unexpectedChar(c)}
		}
	}
}

func unexpectedChar(c byte) string {
	switch c {
	case '=':
		return `unexpected "=" (did you mean "=="?)`
	case '&':
		return `unexpected "&" (did you mean "&&"?)`
	case '|':
		return `unexpected "|" (did you mean "||"?)`
	case '\n', '\r', '\v', '\f':
		return fmt.Sprintf("unexpected character 0x%02x (only spaces and tabs may separate tokens)", c)
	}
	if c < 0x20 || c >= 0x7f {
		return fmt.Sprintf("unexpected character 0x%02x", c)
	}
	return fmt.Sprintf("unexpected character %q", c)
}
