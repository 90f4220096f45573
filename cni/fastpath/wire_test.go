package fastpath

import (
	"encoding/json"
	"reflect"
	"testing"
)

// The hand-made JSON of wire.go against encoding/json, which the agent
// uses on the other end.

func TestRequestDecodesAsSent(t *testing.T) {
	for _, req := range []Request{
		{},
		{Plugin: "calico", Env: []string{}, Stdin: []byte{}},
		{Plugin: "calico-ipam", Env: []string{"CNI_COMMAND=ADD", `Q="x"\y`, "CTL=\x00\x01\x1f\x7f", "UTF8=été ☃ 𝄞", "HTML=<a>&b"},
			Stdin: []byte("{\"cniVersion\":\"1.0.0\"}\n\x00\xff")},
	} {
		data := appendRequest(nil, req)
		var got Request
		if err := json.Unmarshal(data, &got); err != nil {
			t.Fatalf("%s: %v", data, err)
		}
		if !reflect.DeepEqual(got, req) {
			t.Errorf("sent %#v as %s, decoded %#v", req, data, got)
		}
	}
	// Invalid UTF-8 reaches the agent as json.Marshal would send it.
	bad := Request{Plugin: "calico", Env: []string{"X=a\xffb"}}
	var got, want Request
	marshalled, _ := json.Marshal(bad)
	if err := json.Unmarshal(appendRequest(nil, bad), &got); err != nil {
		t.Fatal(err)
	}
	_ = json.Unmarshal(marshalled, &want)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("invalid UTF-8: decoded %q, json.Marshal's decodes %q", got.Env, want.Env)
	}
}

func TestDecodeReplyAsEncodingJSON(t *testing.T) {
	replies := []Reply{{}, {Mine: true, Stdout: []byte(`{"cniVersion":"1.0.0","ips":[]}`)},
		{Mine: false, Reason: `another node's call: "node2" <&>`, Exit: 7}, {Mine: true, Exit: -1, Stdout: []byte{0, 1, 0xff}}}
	var docs []string
	for _, r := range replies {
		b, _ := json.Marshal(r)
		docs = append(docs, string(b))
	}
	docs = append(docs,
		` { "MINE" : true , "exit" : 3 , "extra" : [1, -2.5e3, {"a": null}, "s\u00e9\ud834\udd1e"] , "stdout": null } `,
		`{"mine":null,"reason":"\ud800 lone","exit":null}`,
		`{"mine":true,"mine":false}`, `{"exit":-9223372036854775808}`, `{"exit":-0}`,
		// Refused by both: malformed, or a member of the wrong type.
		`{"mine":true`, `{"mine":tru}`, `{"mine":true,}`, `{"mine":"yes"}`, `{"exit":1.5}`, `{"exit":"1"}`, `{"exit":1e2}`, `{"exit":9223372036854775808}`,
		`{"stdout":"not base64!"}`, `{"stdout":true}`, `{"reason":{}}`, `[]`, `{} x`, `{"a":01}`, `{"a":"\x"}`,
		"{\"a\":\"\x01\"}", `{"a":-}`, `{"a":1.}`, `{"a":1e}`, ``)
	for _, doc := range docs {
		got, err := decodeReply([]byte(doc))
		var want Reply
		werr := json.Unmarshal([]byte(doc), &want)
		if (err != nil) != (werr != nil) {
			t.Errorf("%s: error %v, encoding/json's %v", doc, err, werr)
			continue
		}
		if err == nil && !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %#v, encoding/json gives %#v", doc, got, want)
		}
	}
}

func TestRunDirAsEncodingJSON(t *testing.T) {
	for _, doc := range []string{
		`{"name":"k8s","calico_run_dir":"/run/calico-1","ipam":{"type":"calico-ipam","x":[{"calico_run_dir":"/no"}]}}`,
		`{"Calico_Run_Dir":"/run/upper"}`,
		`{"calico_run_dir":"/run/a","calico_run_dir":"/run/b"}`,
		`{"calico_run_dir":"/run/\u00e9\/x\n"}`,
		`{"calico_run_dir":7}`, `{"calico_run_dir":null}`, `{"calico_run_dir":["/x"]}`,
		`{"calico_run_dir":"/run/a","bad":}`, `{"calico_run_dir":"/run/a"} {}`, `["calico_run_dir"]`, `not json`, ``,
		`{"name":"x"}`,
	} {
		var c struct {
			RunDir string `json:"calico_run_dir"`
		}
		_ = json.Unmarshal([]byte(doc), &c)
		if got := runDir([]byte(doc)); got != c.RunDir {
			t.Errorf("%s: run dir %q, encoding/json gives %q", doc, got, c.RunDir)
		}
	}
}

// FuzzRunDir: on any input, the run dir encoding/json would read.
func FuzzRunDir(f *testing.F) {
	for _, s := range []string{`{"calico_run_dir":"/run/x"}`, `{"a":[1,{"b":"\u00e9"}],"calico_run_dir":"\ud834\udd1e"}`, `{"calico_run_dir":1e5}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		var c struct {
			RunDir string `json:"calico_run_dir"`
		}
		_ = json.Unmarshal(doc, &c)
		if got := runDir(doc); got != c.RunDir {
			t.Errorf("%q: run dir %q, encoding/json gives %q", doc, got, c.RunDir)
		}
	})
}

// FuzzDecodeReply: on any input, what json.Unmarshal makes of it, or an
// error where it gives one.
func FuzzDecodeReply(f *testing.F) {
	for _, s := range []string{`{"mine":true,"stdout":"e30=","exit":0}`, `{"mine":false,"reason":"not mine: \u003cnode2\u003e"}`, `{"exit":-3,"x":[true,null]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		got, err := decodeReply(doc)
		var want Reply
		werr := json.Unmarshal(doc, &want)
		if (err != nil) != (werr != nil) || err == nil && !reflect.DeepEqual(got, want) {
			t.Errorf("%q: %#v, %v; encoding/json gives %#v, %v", doc, got, err, want, werr)
		}
	})
}
