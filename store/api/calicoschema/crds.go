package calicoschema

import (
	"strings"
	"sync"
)

// CRD is what the field list records about one CRD beyond its fields (its
// "#" line): the kind, group/version, plural and scope.
type CRD struct {
	Kind         string
	GroupVersion string // "crd.projectcalico.org/v1"
	Plural       string // "ippools"
	Scope        string // "Cluster" or "Namespaced"
}

// CRDs lists the CRDs of the field list in its order.
var CRDs = sync.OnceValue(func() []CRD {
	var out []CRD
	for line := range strings.SplitSeq(tsv, "\n") {
		rest, ok := strings.CutPrefix(line, "#\t")
		if !ok {
			continue
		}
		if cols := strings.Split(rest, "\t"); len(cols) == 4 {
			out = append(out, CRD{Kind: cols[0], GroupVersion: cols[1], Plural: cols[2], Scope: cols[3]})
		}
	}
	return out
})
