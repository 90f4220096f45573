package api

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The docs say what the code does (issue #22): no doc (docs/*.md) calls a
// field refused that the code honours, or honoured that the code refuses.
// A claim is a table row with a status cell ("honoured ..." or "refused
// ..."), about the field in its first cell; any row of a table under a
// "Refused" heading, about every field it names (camelCase words); or,
// outside tables, fields in backticks said to be so ("`a` and `b` are
// honoured", "`c` stays refused"). Names honoured for one kind and refused
// for another are not judged.

// fieldStatus collects the leaf names honoured and refused by the lists.
func fieldStatus() (honoured, refused map[string]bool) {
	honoured, refused = map[string]bool{}, map[string]bool{}
	leaf := func(p string) string {
		p = strings.ReplaceAll(p, "[]", "")
		return p[strings.LastIndex(p, ".")+1:]
	}
	for p := range enforced {
		honoured[leaf(p)] = true
	}
	for _, p := range delegated {
		honoured[leaf(p)] = true
	}
	for p := range untested {
		honoured[leaf(p)] = true
	}
	for _, rs := range refusals {
		for _, r := range rs {
			if !r.report {
				refused[leaf(r.path)] = true
			}
		}
	}
	return honoured, refused
}

var (
	backticked = regexp.MustCompile("`(?:spec\\.)?([a-zA-Z][a-zA-Z0-9]*)`")
	// "`a`, `b` and `c` are honoured", "`d` stays refused"
	proseClaim = regexp.MustCompile("((?:`[^`]+`(?:,\\s*|\\s+and\\s+|\\s+or\\s+)?)+)\\s+(?:is|are|stays|stay|remains|remain)\\s+(?:still\\s+)?(refused|honoured)\\b")
	camelCase  = regexp.MustCompile(`\b[a-z][a-z0-9]*[A-Z][a-zA-Z0-9]*\b`)
)

// docClaim is one statement a doc makes about a field.
type docClaim struct {
	where, field, status string // status: honoured or refused
}

func docClaims(name, text string) []docClaim {
	var out []docClaim
	inRefusedSection := false
	for i, line := range strings.Split(text, "\n") {
		where := name + ":" + itoa(i+1)
		if strings.HasPrefix(line, "#") {
			inRefusedSection = strings.Contains(line, "Refused")
			continue
		}
		if strings.HasPrefix(strings.TrimSpace(line), "|") {
			cells := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|")
			for _, c := range cells[1:] {
				c = strings.TrimSpace(c)
				for _, st := range []string{"honoured", "refused"} {
					if strings.HasPrefix(c, st) {
						for _, m := range backticked.FindAllStringSubmatch(cells[0], -1) {
							out = append(out, docClaim{where, m[1], st})
						}
					}
				}
			}
			if inRefusedSection {
				for _, w := range camelCase.FindAllString(line, -1) {
					out = append(out, docClaim{where, w, "refused"})
				}
			}
			continue
		}
		for _, m := range proseClaim.FindAllStringSubmatchIndex(line, -1) {
			if strings.HasSuffix(line[:m[2]], "'s ") {
				continue // the pool's `blockSize` is refused: an operation, not the field
			}
			for _, b := range backticked.FindAllStringSubmatch(line[m[2]:m[3]], -1) {
				out = append(out, docClaim{where, b[1], line[m[4]:m[5]]})
			}
		}
	}
	return out
}

func itoa(i int) string {
	b := []byte{}
	for ; i > 0; i /= 10 {
		b = append([]byte{byte('0' + i%10)}, b...)
	}
	return string(b)
}

func TestDocsAgreeWithCode(t *testing.T) {
	honoured, refused := fieldStatus()
	files, err := filepath.Glob(filepath.Join("..", "..", "docs", "*.md"))
	if err != nil || len(files) < 5 {
		t.Fatalf("docs: %v %v", files, err)
	}
	n := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range docClaims(filepath.Base(f), string(b)) {
			h, r := honoured[c.field], refused[c.field]
			switch {
			case h == r:
				continue // not a field, or honoured for one kind and refused for another
			case c.status == "refused" && h:
				t.Errorf("%s calls %s refused; the code honours it", c.where, c.field)
			case c.status == "honoured" && r:
				t.Errorf("%s calls %s honoured; the code refuses it", c.where, c.field)
			}
			n++
		}
	}
	if n < 50 {
		t.Errorf("judged only %d claims: the parser finds nothing", n)
	}
}

// The claim reader finds both directions in each form, and leaves out an
// operation on a field ("the pool's `blockSize` is refused").
func TestDocClaims(t *testing.T) {
	doc := "| `ipv6Support` | refused unless true | x |\n" +
		"| `bpfEnabled` | honoured | x |\n" +
		"Here `vxlanPort`, `interfacePrefix` and `wireguardMTU` are honoured, and `deviceRouteProtocol` stays refused.\n" +
		"A split smaller than the pool's `blockSize` is refused.\n" +
		"## Refused at write\n| FelixConfiguration | routeTableRange (x) |\n"
	var got []string
	for _, c := range docClaims("d", doc) {
		got = append(got, c.where+" "+c.field+" "+c.status)
	}
	want := []string{"d:1 ipv6Support refused", "d:2 bpfEnabled honoured",
		"d:3 vxlanPort honoured", "d:3 interfacePrefix honoured", "d:3 wireguardMTU honoured",
		"d:3 deviceRouteProtocol refused", "d:6 routeTableRange refused"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("claims:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
