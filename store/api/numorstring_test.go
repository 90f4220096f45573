package api

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestPortJSONRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		in       string
		min, max uint16
		name     string
		bad      bool // kept, but Validate must report it
	}{
		{in: `80`, min: 80, max: 80},
		{in: `"80"`, min: 80, max: 80},
		{in: `"1000:2000"`, min: 1000, max: 2000},
		{in: `"http"`, name: "http"},
		{in: `"web-8080"`, name: "web-8080"},
		{in: `65535`, min: 65535, max: 65535},
		{in: `0`, bad: true},
		{in: `70000`, bad: true},
		{in: `"70000"`, bad: true},
		{in: `"2000:1000"`, bad: true},
		{in: `"1:x"`, bad: true},
		{in: `"Bad_Name"`, bad: true},
		{in: `1.5`, bad: true},
		{in: `-1`, bad: true},
	} {
		t.Run(tc.in, func(t *testing.T) {
			var p Port
			if err := json.Unmarshal([]byte(tc.in), &p); err != nil {
				t.Fatalf("Unmarshal: %v", err)
			}
			if msg := p.problem(); (msg != "") != tc.bad {
				t.Errorf("problem() = %q, want bad=%v", msg, tc.bad)
			}
			if !tc.bad && (p.MinPort != tc.min || p.MaxPort != tc.max || p.PortName != tc.name) {
				t.Errorf("got %+v, want %d:%d %q", p, tc.min, tc.max, tc.name)
			}
			out, err := json.Marshal(p)
			if err != nil {
				t.Fatalf("Marshal: %v", err)
			}
			if string(out) != tc.in {
				t.Errorf("re-encoded as %s, want %s", out, tc.in)
			}
		})
	}
	for _, in := range []string{`true`, `{}`, `[80]`, `null`} {
		var p Port
		if err := json.Unmarshal([]byte(in), &p); err == nil {
			t.Errorf("Unmarshal(%s) accepted: %+v", in, p)
		}
	}
}

func TestPortBuiltInCode(t *testing.T) {
	for _, tc := range []struct {
		p    Port
		want string
	}{
		{SinglePort(443), `443`},
		{PortRange(1000, 2000), `"1000:2000"`},
		{NamedPort("metrics"), `"metrics"`},
	} {
		out, _ := json.Marshal(tc.p)
		if string(out) != tc.want {
			t.Errorf("%+v encoded as %s, want %s", tc.p, out, tc.want)
		}
	}
	if _, err := ParsePort("0"); err == nil {
		t.Error("ParsePort(0) accepted")
	}
	if p, err := ParsePort("22:22"); err != nil || p.String() != "22" {
		t.Errorf("ParsePort(22:22) = %v, %v", p, err)
	}
}

func TestProtocolJSONRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		in    string
		num   uint8
		ports bool
		bad   bool
	}{
		{in: `"TCP"`, num: 6, ports: true},
		{in: `"UDP"`, num: 17, ports: true},
		{in: `"ICMP"`, num: 1},
		{in: `"ICMPv6"`, num: 58},
		{in: `"SCTP"`, num: 132, ports: true},
		{in: `"UDPLite"`, num: 136, ports: true},
		{in: `6`, num: 6, ports: true},
		{in: `17`, num: 17, ports: true},
		{in: `47`, num: 47},
		{in: `255`, num: 255},
		{in: `0`, bad: true},
		{in: `256`, bad: true},
		{in: `"tcp"`, bad: true},
		{in: `"6"`, bad: true},
		{in: `"GRE"`, bad: true},
	} {
		t.Run(tc.in, func(t *testing.T) {
			var p Protocol
			if err := json.Unmarshal([]byte(tc.in), &p); err != nil {
				t.Fatalf("Unmarshal: %v", err)
			}
			if msg := p.problem(); (msg != "") != tc.bad {
				t.Errorf("problem() = %q, want bad=%v", msg, tc.bad)
			}
			if n, ok := p.Number(); !tc.bad && (!ok || n != tc.num) {
				t.Errorf("Number() = %d, %v; want %d", n, ok, tc.num)
			}
			if p.SupportsPorts() != tc.ports {
				t.Errorf("SupportsPorts() = %v", p.SupportsPorts())
			}
			out, err := json.Marshal(p)
			if err != nil || string(out) != tc.in {
				t.Errorf("re-encoded as %s (%v), want %s", out, err, tc.in)
			}
		})
	}
	var p Protocol
	if err := json.Unmarshal([]byte(`6.5`), &p); err == nil {
		t.Error("6.5 accepted as a protocol")
	}
}

func TestRulePortsKeepForm(t *testing.T) {
	in := `{"action":"Allow","protocol":6,"source":{},"destination":{"ports":[80,"443","8000:8080","http"]}}`
	var r Rule
	if err := json.Unmarshal([]byte(in), &r); err != nil {
		t.Fatal(err)
	}
	out, _ := json.Marshal(r)
	if string(out) != in {
		t.Errorf("got  %s\nwant %s", out, in)
	}
}

func TestASNumberJSON(t *testing.T) {
	for in, want := range map[string]ASNumber{
		`64512`: 64512, `"64512"`: 64512, `"1.10"`: 1<<16 + 10, `4294967295`: 4294967295,
	} {
		var a ASNumber
		if err := json.Unmarshal([]byte(in), &a); err != nil || a != want {
			t.Errorf("%s: got %d, %v; want %d", in, a, err, want)
		}
		out, _ := json.Marshal(a)
		if string(out) != want.String() {
			t.Errorf("%s re-encoded as %s", in, out)
		}
	}
	for _, in := range []string{`-1`, `4294967296`, `"x"`, `"1.70000"`, `true`} {
		var a ASNumber
		if err := json.Unmarshal([]byte(in), &a); err == nil {
			t.Errorf("%s accepted as %d", in, a)
		}
	}
}

func TestDurationJSON(t *testing.T) {
	var d Duration
	if err := json.Unmarshal([]byte(`"90s"`), &d); err != nil || d.Duration != 90*time.Second {
		t.Fatalf("got %v, %v", d, err)
	}
	out, _ := json.Marshal(d)
	if string(out) != `"1m30s"` {
		t.Errorf("encoded %s", out)
	}
	for _, in := range []string{`90`, `"ninety"`} {
		if err := json.Unmarshal([]byte(in), &d); err == nil {
			t.Errorf("%s accepted", in)
		}
	}
	var c BGPPeer
	err := json.Unmarshal([]byte(`{"spec":{"keepaliveTime":"soon"}}`), &c)
	if err == nil || !strings.Contains(err.Error(), "soon") {
		t.Errorf("bad keepaliveTime: %v", err)
	}
}

func TestFelixConfigurationKeepsUnknownFields(t *testing.T) {
	in := `{"kind":"FelixConfiguration","apiVersion":"projectcalico.org/v3","metadata":{"name":"default"},` +
		`"spec":{"bpfConnectTimeLoadBalancing":"TCP","floatingIPs":"Disabled","healthPort":9099,` +
		`"logSeverityScreen":"Info","reportingInterval":"0s","vxlanVNI":4096,"zzFutureField":{"a":[1,2]}}}`
	r, err := Decode([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	fc := r.(*FelixConfiguration)
	if *fc.Spec.HealthPort != 9099 || fc.Spec.LogSeverityScreen != "Info" || *fc.Spec.VXLANVNI != 4096 {
		t.Errorf("modelled fields: %+v", fc.Spec)
	}
	if !HasUnmodelled(fc) {
		t.Errorf("the two unmodelled fields were not remembered")
	}
	if err := fc.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
	out, err := Marshal(fc)
	if err != nil {
		t.Fatal(err)
	}
	var got, want any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	_ = json.Unmarshal([]byte(in), &want)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %s\nwant %s", out, in)
	}
}
