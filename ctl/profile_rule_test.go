package ctl

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/calico-aio/calico-aio/store/api"
)

func TestParseRule(t *testing.T) {
	tests := []struct {
		words string
		json  string // the rule as stored
		text  string // as "rule show" writes it ("" = words)
	}{
		{"allow", `{"action":"Allow","source":{},"destination":{}}`, ""},
		{"deny", `{"action":"Deny","source":{},"destination":{}}`, ""},
		{"allow from tag web", `{"action":"Allow","source":{"selector":"has(web)"},"destination":{}}`, ""},
		{"allow tcp to ports 80,443,8000:8080",
			`{"action":"Allow","protocol":"TCP","source":{},"destination":{"ports":[80,443,"8000:8080"]}}`, ""},
		{"deny udp from ports 53 cidr 10.0.0.0/8 to tag dns",
			`{"action":"Deny","protocol":"UDP","source":{"nets":["10.0.0.0/8"],"ports":[53]},"destination":{"selector":"has(dns)"}}`, ""},
		{"allow icmp type 8 code 0 from 192.168.0.0/16",
			`{"action":"Allow","protocol":"ICMP","icmp":{"type":8,"code":0},"source":{"nets":["192.168.0.0/16"]},"destination":{}}`,
			"allow icmp type 8 code 0 from cidr 192.168.0.0/16"},
		{"allow icmpv6 type 128", `{"action":"Allow","protocol":"ICMPv6","icmp":{"type":128},"source":{},"destination":{}}`, ""},
		{"ALLOW TCP FROM TAG web", `{"action":"Allow","protocol":"TCP","source":{"selector":"has(web)"},"destination":{}}`,
			"allow tcp from tag web"},
		{"allow 47 to cidr 10.1.2.3", `{"action":"Allow","protocol":47,"source":{},"destination":{"nets":["10.1.2.3/32"]}}`,
			"allow 47 to cidr 10.1.2.3/32"},
		{"allow from selector role == 'db' && tier != 'x'",
			`{"action":"Allow","source":{"selector":"role == 'db' \u0026\u0026 tier != 'x'"},"destination":{}}`, ""},
		{"allow sctp from cidr fd00::/64 cidr fd01::/64 to ports 9000",
			`{"action":"Allow","protocol":"SCTP","source":{"nets":["fd00::/64","fd01::/64"]},"destination":{"ports":[9000]}}`, ""},
		{"deny to tag db from tag web", `{"action":"Deny","source":{"selector":"has(web)"},"destination":{"selector":"has(db)"}}`,
			"deny from tag web to tag db"},
	}
	for _, tc := range tests {
		t.Run(tc.words, func(t *testing.T) {
			words := splitRuleWords(tc.words)
			r, err := parseRule(words)
			if err != nil {
				t.Fatal(err)
			}
			j, _ := json.Marshal(r)
			if string(j) != tc.json {
				t.Errorf("rule JSON\n got %s\nwant %s", j, tc.json)
			}
			want := tc.text
			if want == "" {
				want = tc.words
			}
			text := formatRule(r)
			if strings.Contains(tc.words, "selector") {
				// The selector is one shell word, quoted when shown.
				want = "allow from selector 'role == '\\''db'\\'' && tier != '\\''x'\\'''"
			}
			if text != want {
				t.Errorf("formatRule = %q, want %q", text, want)
			}
			// What show prints parses back to the same rule (selectors aside,
			// which are quoted for the shell).
			if !strings.Contains(tc.words, "selector") {
				back, err := parseRule(strings.Fields(text))
				if err != nil || !sameRule(back, r) {
					t.Errorf("formatRule output %q does not parse back: %v", text, err)
				}
			}
			// The stored rule is valid.
			p := &api.Profile{}
			p.Metadata.Name = "p"
			p.Spec.Ingress = []api.Rule{r}
			if err := p.Validate(); err != nil {
				t.Errorf("rule does not validate: %v", err)
			}
		})
	}
}

// splitRuleWords splits on spaces except inside a selector, which is the
// rest of the words up to from/to (one shell word on the command line).
func splitRuleWords(s string) []string {
	if i := strings.Index(s, "selector "); i >= 0 {
		return append(strings.Fields(s[:i+len("selector")]), s[i+len("selector "):])
	}
	return strings.Fields(s)
}

func TestParseRuleErrors(t *testing.T) {
	tests := []struct{ words, want string }{
		{"", "no rule given"},
		{"permit", `starts with allow or deny, not "permit"`},
		{"allow tcpp", `unknown protocol "tcpp"`},
		{"allow 300", "protocol number 300 is not 1-255"},
		{"allow from", `"from" needs ports, tag, selector or cidr`},
		{"allow from tag", `"tag" after "from" needs a value`},
		{"allow from tag web to", `"to" needs ports, tag, selector or cidr`},
		{"allow from tag a from tag b", `"from" is given twice`},
		{"allow from tag a selector b == 'c'", "give one tag or selector"},
		{"allow from ports 80", "ports need protocol tcp, udp, sctp or udplite"},
		{"allow icmp to ports 80", "ports need protocol"},
		{"allow tcp to ports 0", `invalid port "0"`},
		{"allow tcp to ports 90:80", "minimum is above its maximum"},
		{"allow from cidr 10.0.0.0/33", `cidr "10.0.0.0/33" after "from" is not a CIDR`},
		{"allow from banana", `unexpected "banana" after "from"`},
		{"allow tcp type 8", `"type" needs protocol icmp or icmpv6`},
		{"allow icmp type 300", "want a number 0-254"},
		{"allow icmp code 1", "needs a type before it"},
		{"allow icmp type", `"type" needs a number`},
		{"allow tcp banana", `unexpected "banana": expected from or to`},
		{"allow from tag bad!tag", `tag "bad!tag"`},
	}
	for _, tc := range tests {
		_, err := parseRule(strings.Fields(tc.words))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parseRule(%q) = %v, want an error containing %q", tc.words, err, tc.want)
		}
	}
}

func TestRulePosition(t *testing.T) {
	tests := []struct {
		at     string
		n      int
		forAdd bool
		want   int
		err    bool
	}{
		{"1", 0, true, 0, false},
		{"1", 3, true, 0, false},
		{"4", 3, true, 3, false},
		{"5", 3, true, 0, true},
		{"-1", 3, true, 3, false}, // the new rule becomes the last
		{"-4", 3, true, 0, false},
		{"-5", 3, true, 0, true},
		{"1", 3, false, 0, false},
		{"3", 3, false, 2, false},
		{"4", 3, false, 0, true},
		{"-1", 3, false, 2, false},
		{"-3", 3, false, 0, false},
		{"1", 0, false, 0, true},
		{"0", 3, false, 0, true},
		{"x", 3, false, 0, true},
	}
	for _, tc := range tests {
		got, err := rulePosition(tc.at, tc.n, tc.forAdd)
		if (err != nil) != tc.err || (err == nil && got != tc.want) {
			t.Errorf("rulePosition(%q, %d, %v) = %d, %v; want %d, error %v", tc.at, tc.n, tc.forAdd, got, err, tc.want, tc.err)
		}
	}
}

func TestSameRuleIgnoresJSONForm(t *testing.T) {
	var stored api.Rule
	if err := json.Unmarshal([]byte(`{"action":"Allow","protocol":6,"destination":{"ports":["80"]}}`), &stored); err != nil {
		t.Fatal(err)
	}
	parsed, err := parseRule(strings.Fields("allow 6 to ports 80"))
	if err != nil {
		t.Fatal(err)
	}
	if !sameRule(stored, parsed) {
		t.Errorf("rules with ports \"80\" and 80 differ")
	}
	tcp, _ := parseRule(strings.Fields("allow tcp to ports 81"))
	if sameRule(stored, tcp) {
		t.Errorf("different ports compare equal")
	}
}

func TestFormatRuleNamesWhatItCannotSay(t *testing.T) {
	v := 4
	r := api.Rule{Action: api.ActionAllow, IPVersion: &v, Source: api.EntityRule{NotNets: []string{"10.0.0.0/8"}}}
	got := formatRule(r)
	if got != "allow (also ipVersion, source.notNets: see 'rule json')" {
		t.Errorf("formatRule = %q", got)
	}
}

func TestParseRuleSet(t *testing.T) {
	rs, err := parseRuleSet([]byte(`{"inbound_rules":[{"action":"Allow","source":{"selector":"has(a)"}}],"egress":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(rs.Ingress) != 1 || rs.Ingress[0].Source.Selector != "has(a)" || rs.Egress == nil || len(rs.Egress) != 0 {
		t.Errorf("parsed %+v", rs)
	}
	for doc, want := range map[string]string{
		`{"ingress":[],"inbound_rules":[]}`:           `both the inbound rules`,
		`{"rules":[]}`:                                `unknown field "rules"`,
		`{"ingress":[{"action":"Allow","sauce":{}}]}`: `unknown field "sauce"`,
		`[`: "rules JSON on stdin",
		`{"egress":[{"action":"Allow","protocol":[1,2]}]}`: "egress",
	} {
		if _, err := parseRuleSet([]byte(doc)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("parseRuleSet(%s) = %v, want %q", doc, err, want)
		}
	}
}
