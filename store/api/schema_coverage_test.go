package api

import (
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/calico-aio/calico-aio/store/api/calicoschema"
)

// Coverage of Calico's complete schema (issue #22): every field of every
// kind in Calico v3.32.1's CRDs (calicoschema) is honoured (enforced, with
// the test), refused or reported (refusals), delegated, without behaviour
// (with the reason); every kind we do not
// serve is refused whole.

// schemaPath turns a schema field path into the coverage lists' form: a
// policy's rule fields are the Rule kind's, a map's values and an array of
// plain values are the field itself.
func schemaPath(kind, path string) string {
	if slices.Contains(rulesKinds, kind) {
		for _, dir := range []string{"spec.ingress[].", "spec.egress[]."} {
			if rest, ok := strings.CutPrefix(path, dir); ok {
				return ruleKind + "." + rest
			}
		}
	}
	for {
		p := strings.TrimSuffix(strings.TrimSuffix(path, "{}"), "[]")
		if p == path {
			return kind + "." + p
		}
		path = p
	}
}

// schemaLeaves lists kind's schema fields that have no fields below them.
func schemaLeaves(kind string) []string {
	fields := calicoschema.Fields(kind)
	var out []string
	for i, f := range fields {
		parent := false
		for _, g := range fields[i+1:] {
			if strings.HasPrefix(g.Path, f.Path+".") || strings.HasPrefix(g.Path, f.Path+"[]") || strings.HasPrefix(g.Path, f.Path+"{}") {
				parent = true
				break
			}
		}
		if !parent {
			out = append(out, f.Path)
		}
	}
	return out
}

func TestEverySchemaFieldAccountedFor(t *testing.T) {
	n := 0
	for _, kind := range calicoschema.Kinds() {
		if _, ok := kinds[kind]; !ok {
			continue // TestUnservedKindsRefused
		}
		for _, leaf := range schemaLeaves(kind) {
			n++
			p := schemaPath(kind, leaf)
			in := listed(p, strings.SplitN(p, ".", 2)[0])
			switch len(in) {
			case 0:
				t.Errorf("%s (schema %s.%s) is neither honoured nor refused: enforce it (name the test), refuse it at write unless at Calico's default, or say why it has no behaviour", p, kind, leaf)
			case 1:
			default:
				if !allSame(in) {
					t.Errorf("%s is in several lists: %v", p, in)
				}
			}
		}
	}
	if n < 500 {
		t.Fatalf("walked only %d schema fields: the schema table is not loaded", n)
	}
}

func allSame(s []string) bool {
	for _, x := range s {
		if x != s[0] {
			return false
		}
	}
	return true
}

// inSchema says whether a list entry names a field of Calico's schema that
// our types do not model.
func inSchema(entry string) bool {
	kind, path, _ := strings.Cut(entry, ".")
	return calicoschema.Known(kind, path)
}

// Every kind of Calico's schema that has no type here is refused whole at
// write, with why, and no served kind is in that list.
func TestUnservedKindsRefused(t *testing.T) {
	for _, kind := range calicoschema.Kinds() {
		_, served := kinds[kind]
		why, unserved := unservedKinds[kind]
		if served == unserved {
			t.Errorf("%s: served %v, in unservedKinds %v", kind, served, unserved)
			continue
		}
		if served {
			continue
		}
		_, err := Decode([]byte(`{"kind":"` + kind + `","apiVersion":"projectcalico.org/v3","metadata":{"name":"x"},"spec":{}}`))
		want := `kind "` + kind + `" is not supported by this agent: ` + why
		if err == nil || err.Error() != want {
			t.Errorf("Decode %s: %v, want %q", kind, err, want)
		}
	}
}

// Calico's documented fields of the kinds without a CRD are accounted for
// like the schema's.
func TestDocumentedFieldsAccountedFor(t *testing.T) {
	for kind, paths := range documentedFields {
		for _, p := range paths {
			e := kind + "." + p
			if in := listed(e, kind); len(in) == 0 {
				t.Errorf("%s: in no list: honour it (name the test) or refuse it", e)
			}
		}
	}
}

// What real calicoctl v3.32.1 accepted (recorded inputs) passes strict
// decoding, and a typo in it does not.
func TestRecordedInputsKnown(t *testing.T) {
	b, err := os.ReadFile("testdata/calicoctl-inputs-v3.32.1.yaml")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, doc := range strings.Split(string(b), "\n---\n") {
		j, err := yaml.YAMLToJSON([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(j), `"kind"`) {
			continue
		}
		n++
		if err := CheckKnownFields(j); err != nil {
			t.Errorf("%s: %v", j, err)
		}
		if _, err := Decode(j); err != nil {
			continue // a kind refused whole (TestUnservedKindsRefused)
		}
		typo := strings.Replace(string(j), `"spec":{`, `"spec":{"zzTypo":1,`, 1)
		var uf *UnknownFieldError
		if err := CheckKnownFields([]byte(typo)); !errors.As(err, &uf) || uf.Path != "spec.zzTypo" {
			t.Errorf("%s: %v, want spec.zzTypo unknown", typo, err)
		}
	}
	if n < 10 {
		t.Fatalf("read only %d documents", n)
	}
}
