package selector

import "fmt"

// tokKind identifies a lexical token. Words such as "in", "not", "contains" and the function
// names are all lexed as tokIdent; the parser decides from context whether a word is a label
// key or an operator, so labels may be called "in", "has" or "all" without ambiguity.
type tokKind int

const (
	tokEOF    tokKind = iota
	tokIdent          // label key or keyword: [A-Za-z0-9][A-Za-z0-9._/-]*
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

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

func isKeyChar(c byte) bool {
	return isAlnum(c) || c == '.' || c == '_' || c == '/' || c == '-'
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
		case isAlnum(c):
			for i < len(in) && isKeyChar(in[i]) {
				i++
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
	case '.', '_', '/', '-':
		return fmt.Sprintf("unexpected %q (a label key must start with a letter or digit)", c)
	}
	if c < 0x20 || c >= 0x7f {
		return fmt.Sprintf("unexpected character 0x%02x", c)
	}
	return fmt.Sprintf("unexpected character %q", c)
}
