package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/calico-aio/calico-aio/e2e/kubeapi"
)

// The checked-in CRDs and the recorded field list (the fact), read
// independently of the generator: build/k8s/crds.yaml parsed back into the
// field list's rows must equal the recorded rows, line for line.

const (
	crdsFile   = "../k8s/crds.yaml"
	fieldList  = "../../store/api/calicoschema/crd-fields-v3.32.1.tsv"
	extrasFile = "crd-extras-v3.32.1.tsv"
)

func TestCheckedInCRDsAreGenerated(t *testing.T) {
	checkGenerated(t, crdsFile, Generate)
}

// checkGenerated fails unless file is what gen writes.
func checkGenerated(t *testing.T, file string, gen func() ([]byte, error)) {
	t.Helper()
	want, err := gen()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs from the generator's output: run make crds", file)
	}
}

type obj = map[string]any

// loadCRDs parses the checked-in YAML stream.
func loadCRDs(t *testing.T) []obj {
	t.Helper()
	crds, err := kubeapi.ReadManifest(crdsFile)
	if err != nil {
		t.Fatal(err)
	}
	return crds
}

func TestCRDsMatchFieldList(t *testing.T) {
	var got, gotExtras []string
	for _, crd := range loadCRDs(t) {
		rows, extras := fieldRows(t, crd)
		got, gotExtras = append(got, rows...), append(gotExtras, extras...)
	}
	want := dataRows(t, fieldList, func(line string) string { return line })
	if len(want) < 1300 {
		t.Fatalf("the field list has only %d rows", len(want))
	}
	compareRows(t, got, want)
	// The schema members the field list does not carry: exactly the
	// recorded extras, each where it was recorded.
	wantExtras := dataRows(t, extrasFile, func(line string) string {
		cols := strings.SplitN(line, "\t", 4)
		var v any
		if err := json.Unmarshal([]byte(cols[3]), &v); err != nil {
			t.Fatalf("%s: %q: %v", extrasFile, line, err)
		}
		return strings.Join(cols[:3], "\t") + "\t" + canonical(t, v)
	})
	if len(wantExtras) < 300 {
		t.Fatalf("the extras have only %d rows", len(wantExtras))
	}
	slices.Sort(gotExtras)
	slices.Sort(wantExtras)
	compareRows(t, gotExtras, wantExtras)
}

// dataRows reads a data file's rows (and the field list's "#" CRD lines).
func dataRows(t *testing.T, path string, row func(string) string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for line := range strings.SplitSeq(string(b), "\n") {
		switch {
		case strings.HasPrefix(line, "#\t"):
			out = append(out, line)
		case line != "" && !strings.HasPrefix(line, "#"):
			out = append(out, row(line))
		}
	}
	return out
}

// compareRows reports the rows that differ; 0 differences pass.
func compareRows(t *testing.T, got, want []string) {
	t.Helper()
	diffs := 0
	for i := range max(len(got), len(want)) {
		g, w := at(got, i), at(want, i)
		if g != w {
			if diffs++; diffs <= 20 {
				t.Errorf("row %d:\n got %q\nwant %q", i, g, w)
			}
		}
	}
	if diffs > 0 {
		t.Errorf("%d rows differ (%d generated, %d recorded)", diffs, len(got), len(want))
	}
}

func at(s []string, i int) string {
	if i < len(s) {
		return s[i]
	}
	return "<none>"
}

// fieldRows renders one CRD as the field list does: its "#" line, then
// every field below the top level (apiVersion, kind and metadata, which
// every CRD has, are checked here and not listed).
func fieldRows(t *testing.T, crd obj) (rows, extras []string) {
	t.Helper()
	spec, _ := crd["spec"].(obj)
	names, _ := spec["names"].(obj)
	versions, _ := spec["versions"].([]any)
	if len(versions) != 1 {
		t.Fatalf("%v: %d versions, want 1", names["kind"], len(versions))
	}
	v, _ := versions[0].(obj)
	if v["served"] != true || v["storage"] != true {
		t.Errorf("%v: version %v is not served and stored", names["kind"], v["name"])
	}
	kind, _ := names["kind"].(string)
	if want := spec["group"].(string); crd["metadata"].(obj)["name"] != names["plural"].(string)+"."+want {
		t.Errorf("%s: CRD name %v is not <plural>.<group>", kind, crd["metadata"].(obj)["name"])
	}
	if names["listKind"] != kind+"List" || names["singular"] != strings.ToLower(kind) {
		t.Errorf("%s: names %v", kind, names)
	}
	rows = []string{fmt.Sprintf("#\t%s\t%s/%s\t%s\t%s", kind, spec["group"], v["name"], names["plural"], spec["scope"])}
	root, _ := v["schema"].(obj)["openAPIV3Schema"].(obj)
	props, _ := root["properties"].(obj)
	for _, m := range []string{"apiVersion", "kind"} {
		if !mapsEqual(props[m], obj{"type": "string"}) {
			t.Errorf("%s: %s is %v, want a string", kind, m, props[m])
		}
	}
	if !mapsEqual(props["metadata"], obj{"type": "object"}) {
		t.Errorf("%s: metadata is %v, want an object", kind, props["metadata"])
	}
	w := rowWalk{t: t, kind: kind}
	w.extra(root, "")
	w.members(root, "", []string{"apiVersion", "kind", "metadata"})
	return append(rows, w.rows...), w.extras
}

func mapsEqual(a any, b obj) bool { return fmt.Sprint(a) == fmt.Sprint(b) }

type rowWalk struct {
	t      *testing.T
	kind   string
	rows   []string
	extras []string // members the field list does not carry, as crd-extras rows
}

// fieldListKeys are the JSONSchemaProps members the field list accounts for.
var fieldListKeys = []string{"type", "format", "enum", "pattern", "minimum", "maximum", "items", "properties",
	"additionalProperties", "required", "x-kubernetes-int-or-string", "anyOf", "description"}

// extra records s's members that the field list does not carry.
func (w *rowWalk) extra(s obj, path string) {
	for _, k := range slices.Sorted(maps.Keys(s)) {
		switch {
		case k == "anyOf" && fmt.Sprint(s[k]) != "[map[type:integer] map[type:string]]":
			w.t.Errorf("%s %s: anyOf %v is not int-or-string's", w.kind, path, s[k])
		case !slices.Contains(fieldListKeys, k):
			w.extras = append(w.extras, w.kind+"\t"+path+"\t"+k+"\t"+canonical(w.t, s[k]))
		}
	}
}

// canonical is v as compact JSON with sorted keys.
func canonical(t *testing.T, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// members lists s's properties, sorted, depth first, skipping skip.
func (w *rowWalk) members(s obj, path string, skip []string) {
	props, _ := s["properties"].(obj)
	var required []string
	for _, r := range asList(s["required"]) {
		required = append(required, r.(string))
	}
	for _, k := range slices.Sorted(maps.Keys(props)) {
		if slices.Contains(skip, k) {
			continue
		}
		p := k
		if path != "" {
			p = path + "." + k
		}
		if slices.Contains(required, k) {
			p += "!"
		}
		w.field(props[k].(obj), p)
	}
}

// field lists one field and what is below it.
func (w *rowWalk) field(s obj, path string) {
	w.extra(s, strings.ReplaceAll(path, "!", ""))
	w.rows = append(w.rows, w.kind+"\t"+path+"\t"+strings.Join(columns(s), "\t"))
	if items, ok := s["items"].(obj); ok {
		w.field(items, path+"[]")
	}
	if values, ok := s["additionalProperties"].(obj); ok {
		w.field(values, path+"{}")
	}
	w.members(s, path, nil)
}

// columns are a field's type and constraints in the field list's form.
func columns(s obj) []string {
	typ, _ := s["type"].(string)
	cols := []string{typ}
	if s["x-kubernetes-int-or-string"] == true {
		cols = append(cols, "int-or-string")
	}
	if enum := asList(s["enum"]); enum != nil {
		var vals []string
		for _, e := range enum {
			vals = append(vals, scalar(e))
		}
		cols = append(cols, "enum="+strings.Join(vals, "|"))
	}
	for _, c := range []struct{ key, name string }{{"format", "format"}, {"pattern", "pattern"}, {"minimum", "min"}, {"maximum", "max"}} {
		if v, ok := s[c.key]; ok {
			cols = append(cols, c.name+"="+scalar(v))
		}
	}
	return cols
}

func asList(v any) []any { l, _ := v.([]any); return l }

// scalar prints a YAML scalar as the field list does (integers whole).
func scalar(v any) string {
	if f, ok := v.(float64); ok {
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	return fmt.Sprint(v)
}
