package api

import (
	"encoding/json"
	"reflect"
	"testing"
)

// jsonValue parses b as generic JSON.
func jsonValue(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return m
}

// Every kind keeps members it does not model, at the top level, in
// metadata and in spec, through Decode and Marshal; json.Marshal alone does
// not (that is why writers use Marshal).
func TestEveryKindKeepsUnmodelledMembers(t *testing.T) {
	for _, k := range Kinds() {
		in := `{"kind":"` + k.Kind + `","apiVersion":"projectcalico.org/v3","futureTop":"t",` +
			`"metadata":{"name":"x","namespace":"ns","generation":7,"finalizers":["f"]},"spec":{"futureSpec":{"a":[1,{"b":null}]}}}`
		r, err := Decode([]byte(in))
		if err != nil {
			t.Fatalf("%s: %v", k.Kind, err)
		}
		out, err := Marshal(r)
		if err != nil {
			t.Fatalf("%s: %v", k.Kind, err)
		}
		got, want := jsonValue(t, out), jsonValue(t, []byte(in))
		if !reflect.DeepEqual(got["futureTop"], want["futureTop"]) {
			t.Errorf("%s: futureTop = %v, want %v", k.Kind, got["futureTop"], want["futureTop"])
		}
		gs, _ := got["spec"].(map[string]any)
		if ws := want["spec"].(map[string]any); !reflect.DeepEqual(gs["futureSpec"], ws["futureSpec"]) {
			t.Errorf("%s: spec.futureSpec = %v, want %v", k.Kind, gs["futureSpec"], ws["futureSpec"])
		}
		gm, wm := got["metadata"].(map[string]any), want["metadata"].(map[string]any)
		for _, key := range []string{"generation", "finalizers"} {
			if !reflect.DeepEqual(gm[key], wm[key]) {
				t.Errorf("%s: metadata.%s = %v, want %v", k.Kind, key, gm[key], wm[key])
			}
		}
		plain, _ := json.Marshal(r)
		if _, ok := jsonValue(t, plain)["futureTop"]; ok {
			t.Errorf("%s: json.Marshal wrote an unmodelled member; the test no longer shows what Marshal adds", k.Kind)
		}
	}
}

// Modelled fields win, keys match as encoding/json matches them, arrays are
// matched by position only at the same length, and maps model every key.
func TestUnmodelledRules(t *testing.T) {
	in := `{"kind":"GlobalNetworkPolicy","metadata":{"name":"p","annotations":{"a":"1"}},"spec":{"Selector":"all()",` +
		`"ingress":[{"action":"Allow","x":1,"source":{"selector":"has(a)","y":2}},{"action":"Deny","x":3}]}}`
	r, err := Decode([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	p := r.(*GlobalNetworkPolicy)
	if p.Spec.Selector != "all()" {
		t.Fatalf("Selector matched case-insensitively: %q", p.Spec.Selector)
	}
	p.Spec.Ingress[0].Action = "Deny"
	p.Metadata.Annotations = nil
	out, err := Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"kind":"GlobalNetworkPolicy","apiVersion":"projectcalico.org/v3","metadata":{"name":"p"},"spec":{"ingress":[` +
		`{"action":"Deny","source":{"selector":"has(a)","y":2},"destination":{},"x":1},{"action":"Deny","source":{},"destination":{},"x":3}],"selector":"all()"}}`
	if string(out) != want {
		t.Errorf("same length:\ngot  %s\nwant %s", out, want)
	}
	p.Spec.Ingress = p.Spec.Ingress[:1]
	out, _ = Marshal(p)
	if g := jsonValue(t, out)["spec"].(map[string]any)["ingress"].([]any)[0].(map[string]any); g["x"] != nil {
		t.Errorf("rules changed length, yet x was kept by position: %s", out)
	}

	// A fresh object takes the stored one's unmodelled members where it
	// has none of its own.
	fresh := &GlobalNetworkPolicy{TypeMeta: TypeMeta{Kind: "GlobalNetworkPolicy"}}
	fresh.Metadata.Name = "p"
	fresh.Spec.Ingress = []Rule{{Action: "Allow"}, {Action: "Allow"}}
	KeepUnmodelled(fresh, r)
	out, _ = Marshal(fresh)
	rules := jsonValue(t, out)["spec"].(map[string]any)["ingress"].([]any)
	if rules[0].(map[string]any)["x"] != 1.0 || rules[1].(map[string]any)["x"] != 3.0 {
		t.Errorf("KeepUnmodelled: %s", out)
	}
}
