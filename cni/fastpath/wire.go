package fastpath

import (
	"encoding/base64"
	"strconv"
)

// The JSON this package reads and writes by hand, so as not to import
// encoding/json (see init in fastpath.go): the Request it sends, the Reply
// the agent sends back (the agent uses encoding/json on both), and the
// netconf's calico_run_dir (read with jsonscan.go). wire_test.go checks each
// against encoding/json.

// appendRequest is req as encoding/json would give it, but for invalid
// UTF-8, which goes as it is (the agent's decoder makes it U+FFFD, as
// json.Marshal would have) and for <, > and &, which need no escape.
func appendRequest(b []byte, req Request) []byte {
	b = append(b, `{"plugin":`...)
	b = appendString(b, req.Plugin)
	b = append(b, `,"env":`...)
	if req.Env == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i, e := range req.Env {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, e)
		}
		b = append(b, ']')
	}
	b = append(b, `,"stdin":`...)
	if req.Stdin == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '"')
		b = base64.StdEncoding.AppendEncode(b, req.Stdin)
		b = append(b, '"')
	}
	return append(b, '}')
}

func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}

// runDir is the netconf's calico_run_dir: "" when it has none, when the
// netconf is not a JSON object, or when the value is not a string (as
// json.Unmarshal into a struct with that one field leaves it).
func runDir(netconf []byte) string {
	s := &scanner{b: netconf}
	dir := ""
	err := s.object(func(key string) error {
		if !foldEq(key, "calico_run_dir") || s.next() != '"' {
			return s.value()
		}
		v, err := s.str()
		dir = v
		return err
	})
	if err != nil || s.end() != nil {
		return ""
	}
	return dir
}

// decodeReply is json.Unmarshal of an agent's reply: an error for
// malformed JSON or a member of the wrong type.
func decodeReply(data []byte) (Reply, error) {
	var rep Reply
	s := &scanner{b: data}
	err := s.object(func(key string) error {
		switch {
		case foldEq(key, "mine"):
			null, v, err := s.literal()
			if !null {
				rep.Mine = v
			}
			return err
		case foldEq(key, "reason"), foldEq(key, "stdout"):
			if s.next() != '"' {
				null, _, err := s.literal()
				if err == nil && !null {
					err = errSyntax // a boolean
				}
				return err
			}
			v, err := s.str()
			if err != nil {
				return err
			}
			if foldEq(key, "reason") {
				rep.Reason = v
				return nil
			}
			rep.Stdout, err = base64.StdEncoding.DecodeString(v)
			return err
		case foldEq(key, "exit"):
			if s.next() == 'n' {
				_, _, err := s.literal()
				return err
			}
			n, err := s.number()
			if err != nil {
				return err
			}
			rep.Exit, err = strconv.Atoi(n) // a fraction, an exponent or an overflow fails, as in encoding/json
			return err
		}
		return s.value()
	})
	if err != nil {
		return Reply{}, err
	}
	if err := s.end(); err != nil {
		return Reply{}, err
	}
	return rep, nil
}
