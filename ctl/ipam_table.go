package ctl

import (
	"io"
	"regexp"
	"strings"
	"sync"
	"unicode/utf8"
)

// boxTable is the bordered table calicoctl's ipam commands print:
//
//	+----------+--------------+
//	| GROUPING |     CIDR     |
//	+----------+--------------+
//	| IP Pool  | 10.48.0.0/16 |
//	+----------+--------------+
//
// Headers are centred (an odd space goes to the right), cells holding a
// plain number are right-aligned and all others left-aligned, every cell has
// one space of padding each side.
type boxTable struct {
	header []string
	rows   [][]string
}

func newBoxTable(header ...string) *boxTable { return &boxTable{header: header} }

func (t *boxTable) add(cells ...string) { t.rows = append(t.rows, cells) }

// plainNumber is what counts as a number for alignment: 64, -3, 0.5 (not
// 1.2089e+24, which stays left-aligned).
var plainNumber = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^-?\d+(\.\d+)?$`) })

func (t *boxTable) write(w io.Writer) error {
	widths := make([]int, len(t.header))
	for i, h := range t.header {
		widths[i] = utf8.RuneCountInString(h)
	}
	for _, r := range t.rows {
		for i, c := range r {
			if i < len(widths) {
				widths[i] = max(widths[i], utf8.RuneCountInString(c))
			}
		}
	}
	var b strings.Builder
	rule := func() {
		for _, wd := range widths {
			b.WriteString("+" + strings.Repeat("-", wd+2))
		}
		b.WriteString("+\n")
	}
	line := func(cells []string, align func(cell string, pad int) (left, right int)) {
		for i, wd := range widths {
			c := ""
			if i < len(cells) {
				c = cells[i]
			}
			l, r := align(c, wd-utf8.RuneCountInString(c))
			b.WriteString("| " + strings.Repeat(" ", l) + c + strings.Repeat(" ", r) + " ")
		}
		b.WriteString("|\n")
	}
	rule()
	line(t.header, func(_ string, pad int) (int, int) { return pad / 2, pad - pad/2 })
	rule()
	for _, r := range t.rows {
		line(r, func(c string, pad int) (int, int) {
			if plainNumber().MatchString(c) {
				return pad, 0
			}
			return 0, pad
		})
	}
	rule()
	_, err := io.WriteString(w, b.String())
	return err
}
