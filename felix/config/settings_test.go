package config

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/calico-aio/calico-aio/felix/calc"
	"github.com/calico-aio/calico-aio/felix/config/configtest"
	"github.com/calico-aio/calico-aio/store/api"
)

// settingCase is one supported setting with a value from each source: the
// environment's text and what it reads as, and two datastore values (JSON)
// that differ from it and from each other; bad is a stored value the
// loader must skip (empty: the type admits no bad value).
type settingCase struct {
	envText, envJSON string
	node, global     string
	bad              string
}

var settingCases = map[string]settingCase{
	// Endpoint status files for the CNI policy wait (felix/status/files.go).
	"endpointStatusPathPrefix": {"/run/x", `"/run/x"`, `"none"`, `"/var/run/calico"`, `"relative/dir"`},

	// Routes to local workloads and workload interfaces (felix/dataplane).
	"deviceRouteSourceAddress":     {"192.0.2.7", `"192.0.2.7"`, `"192.0.2.8"`, `"192.0.2.9"`, `"fd00::1"`},
	"deviceRouteSourceAddressIPv6": {"fd00::7", `"fd00::7"`, `"fd00::8"`, `"fd00::9"`, `"192.0.2.1"`},
	"deviceRouteProtocol":          {"3", `3`, `99`, `42`, `256`},
	"interfacePrefix":              {"cali,tap", `"cali,tap"`, `"tap"`, `"cali"`, `"cali,"`},
	"interfaceExclude":             {"kube-ipvs0,/^veth/", `"kube-ipvs0,/^veth/"`, `"eth9"`, `"/^dummy/"`, `"/(/"`},
	"routeTableRange":              {"10-20", `{"min":10,"max":20}`, `{"min":1,"max":250}`, `{"min":5,"max":6}`, `{"min":0,"max":251}`},
	"routeTableRanges":             {"1-250 300-400", `[{"min":1,"max":250},{"min":300,"max":400}]`, `[{"min":1000,"max":2000}]`, `[{"min":1,"max":250}]`, `[{"min":5,"max":4}]`},
	"routeSource":                  {"workloadips", `"WorkloadIPs"`, `"CalicoIPAM"`, `"WorkloadIPs"`, `"BGP"`},
	"programClusterRoutes":         {"enabled", `"Enabled"`, `"Disabled"`, `"Enabled"`, `"Felix"`},

	"logSeverityScreen":           {"debug", `"Debug"`, `"Warning"`, `"Error"`, `"Loud"`},
	"logSeverityFile":             {"ERROR", `"Error"`, `"Debug"`, `"Info"`, `"Chatty"`},
	"logFilePath":                 {"/var/log/x.log", `"/var/log/x.log"`, `"none"`, `"/tmp/felix.log"`, `"relative.log"`},
	"ipForwarding":                {"DISABLED", `"Disabled"`, `"Enabled"`, `"Disabled"`, `"Sometimes"`},
	"defaultEndpointToHostAction": {"accept", `"Accept"`, `"Return"`, `"Drop"`, `"Allow"`},
	"failsafeInboundHostPorts": {"tcp:22, udp:68, tcp:[fd00::/8]:179", `[{"protocol":"TCP","port":22},{"protocol":"UDP","port":68},{"protocol":"TCP","port":179,"net":"fd00::/8"}]`,
		`[{"protocol":"TCP","port":2222}]`, `[]`, `[{"protocol":"ICMP","port":1}]`},
	"failsafeOutboundHostPorts":      {"none", `[]`, `[{"protocol":"UDP","port":53,"net":"10.0.0.0/8"}]`, `[{"protocol":"TCP","port":443}]`, `[{"protocol":"TCP","port":1,"net":"nope"}]`},
	"mtuIfacePattern":                {"^bond", `"^bond"`, `"^eth"`, `"^ens"`, `"("`},
	"vxlanEnabled":                   {"yes", `true`, `false`, `true`, ``},
	"vxlanPort":                      {"4790", `4790`, `8472`, `4791`, `70000`},
	"vxlanVNI":                       {"42", `42`, `4097`, `7`, `16777216`},
	"vxlanMTU":                       {"1350", `1350`, `1400`, `1410`, `20`},
	"vxlanMTUV6":                     {"1330", `1330`, `1380`, `1390`, `70000`},
	"ipipMTU":                        {"1420", `1420`, `1440`, `1430`, `30`},
	"ipipEnabled":                    {"true", `true`, `false`, `true`, ``},
	"allowVXLANPacketsFromWorkloads": {"true", `true`, `false`, `true`, ``},
	"allowIPIPPacketsFromWorkloads":  {"1", `true`, `true`, `false`, ``},
	"chainInsertMode":                {"append", `"Append"`, `"Insert"`, `"Append"`, `"Prepend"`},
	"iptablesFilterAllowAction":      {"return", `"Return"`, `"Accept"`, `"Return"`, `"Allow"`},
	"iptablesMangleAllowAction":      {"RETURN", `"Return"`, `"Accept"`, `"Return"`, `"Drop"`},
	"iptablesMarkMask":               {"0xff000000", `4278190080`, `983040`, `1792`, `3`},
	"natOutgoingAddress":             {"192.0.2.7", `"192.0.2.7"`, `"192.0.2.8"`, `"192.0.2.9"`, `"fd00::1"`},
	"natPortRange":                   {"32768-40000", `"32768:40000"`, `"1000:2000"`, `5000`, `"9:1"`},
	"iptablesBackend":                {"nft", `"NFT"`, `"Legacy"`, `"Auto"`, `"Both"`},
	"removeExternalRoutes":           {"false", `false`, `true`, `false`, ``},
	"nftablesMode":                   {"disabled", `"Disabled"`, `"Auto"`, `"Disabled"`, `"Enabled"`},
	"routeSyncDisabled":              {"true", `true`, `false`, `true`, ``},
	"ipv4NormalRoutePriority":        {"100", `100`, `2000`, `300`, `0`},
	"ipv6NormalRoutePriority":        {"101", `101`, `2001`, `301`, `2147483647`},
	"ipv4ElevatedRoutePriority":      {"50", `50`, `500`, `30`, `-1`},
	"ipv6ElevatedRoutePriority":      {"51", `51`, `501`, `31`, `0`},
	"iptablesRefreshInterval":        {"10", `"10s"`, `"5s"`, `"1m0s"`, `"-1s"`},
	"routeRefreshInterval":           {"2.5", `"2.5s"`, `"0s"`, `"1m0s"`, `"-1s"`},
	"ipsetsRefreshInterval":          {"1m", `"1m0s"`, `"15s"`, `"0s"`, `"-1s"`},
	"interfaceRefreshInterval":       {"0", `"0s"`, `"20s"`, `"30s"`, `"-1m0s"`},
	"healthEnabled":                  {"false", `false`, `true`, `false`, ``},
	"healthHost":                     {"0.0.0.0", `"0.0.0.0"`, `"127.0.0.2"`, `"node1.example"`, `"a b"`},
	"healthPort":                     {"19099", `19099`, `29099`, `9098`, `0`},
	"healthTimeoutOverrides": {"InternalDataplaneMainLoop=2m, CalculationGraph=30s", `[{"name":"InternalDataplaneMainLoop","timeout":"2m0s"},{"name":"CalculationGraph","timeout":"30s"}]`,
		`[{"name":"InternalDataplaneMainLoop","timeout":"0s"}]`, `[{"name":"CalculationGraph","timeout":"1m0s"}]`, `[{"name":"a b","timeout":"1s"}]`},
	"prometheusMetricsEnabled":  {"f", `false`, `false`, `true`, ``},
	"prometheusMetricsHost":     {"::1", `"::1"`, `"127.0.0.1"`, `"localhost"`, `"[::1]"`},
	"prometheusMetricsPort":     {"19091", `19091`, `9092`, `9093`, `65536`},
	"endpointReportingEnabled":  {"true", `true`, `false`, `true`, ``},
	"endpointReportingDelay":    {"2", `"2s"`, `"0s"`, `"5s"`, `"-1s"`},
	"reportingInterval":         {"0", `"0s"`, `"10s"`, `"1m0s"`, `"-1s"`},
	"reportingTTL":              {"45", `"45s"`, `"30s"`, `"2m0s"`, `"-1s"`},
	"iptablesLockTimeout":       {"3", `"3s"`, `"10s"`, `"0s"`, `"-1s"`},
	"iptablesLockProbeInterval": {"20", `"20ms"`, `"100ms"`, `"1s"`, `"-1s"`},
	"ipv6Support":               {"false", `false`, `true`, `false`, ``},
	"logSeveritySys":            {"none", `"None"`, `"Debug"`, `"Warning"`, `"Verbose"`},
	"maxIpsetSize":              {"65536", `65536`, `1000`, `2097152`, `0`},
	"netlinkTimeout":            {"2.5", `"2.5s"`, `"30s"`, `"1m0s"`, `"-1s"`},

	// Policy rendering (felix/rules).
	"iptablesFilterDenyAction":           {"reject", `"Reject"`, `"Drop"`, `"Reject"`, `"Deny"`},
	"disableConntrackInvalidCheck":       {"true", `true`, `false`, `true`, ``},
	"natOutgoingExclusions":              {"ippoolsandhostips", `"IPPoolsAndHostIPs"`, `"IPPoolsOnly"`, `"IPPoolsAndHostIPs"`, `"HostIPs"`},
	"iptablesNATOutgoingInterfaceFilter": {"eth+", `"eth+"`, `"ens3"`, `"bond0.1"`, `"eth 0"`},
	"workloadSourceSpoofing":             {"any", `"Any"`, `"Disabled"`, `"Any"`, `"All"`},
	"logActionRateLimit":                 {"10/second", `"10/second"`, `"5/minute"`, `"1/day"`, `"10/sec"`},
	"logActionRateLimitBurst":            {"0", `0`, `9999`, `20`, `10000`},
	"logPrefix":                          {"node-a drop", `"node-a drop"`, `"n1"`, `"cluster/x"`, `"%t-%n"`},
	"serviceLoopPrevention":              {"reject", `"Reject"`, `"Disabled"`, `"Drop"`, `"Block"`},
	"floatingIPs":                        {"enabled", `"Enabled"`, `"Disabled"`, `"Enabled"`, `"On"`},
	"prometheusMetricsCertFile":          {"/e/tls.crt", `"/e/tls.crt"`, `"/n/tls.crt"`, `"/g/tls.crt"`, ""},
	"prometheusMetricsKeyFile":           {"/e/tls.key", `"/e/tls.key"`, `"/n/tls.key"`, `"/g/tls.key"`, ""},
	"prometheusMetricsCAFile":            {"/e/ca.crt", `"/e/ca.crt"`, `"/n/ca.crt"`, `"/g/ca.crt"`, ""},
	"prometheusGoMetricsEnabled":         {"false", `false`, `true`, `false`, ``},
	"prometheusProcessMetricsEnabled":    {"f", `false`, `true`, `false`, ``},
	"kubeNodePortRanges":                 {"30000:30100, 31000", `["30000:30100",31000]`, `["32000:32100"]`, `[30500]`, `["9:1"]`},
}

// fc is a FelixConfiguration with one field set, felixUpdate the syncer's
// update for one (configtest).
var fc, felixUpdate = configtest.Object, configtest.Update

// fieldJSON is field's value in s as JSON, "" when unset.
func fieldJSON(s spec, field string) string {
	b, _ := json.Marshal(s)
	var m map[string]json.RawMessage
	_ = json.Unmarshal(b, &m)
	return string(m[field])
}

// TestSettingsPrecedence runs every FELIX_* variable the agent supports
// and its FelixConfiguration field through Calico's precedence:
// environment over node.<name> over default over Calico's default; a bad
// stored value falls through to the next source.
func TestSettingsPrecedence(t *testing.T) {
	for _, st := range settings {
		c, ok := settingCases[st.name]
		if !ok {
			t.Errorf("%s: no precedence case; add one to settingCases", st.name)
			continue
		}
		env, err := ParseFelixEnv([]string{strings.ToLower(st.env) + "=" + c.envText}) // the name in any case
		if err != nil {
			t.Errorf("%s=%s: %v", st.env, c.envText, err)
			continue
		}
		node, global := fc(t, "node.n1", st.name, c.node), fc(t, "default", st.name, c.global)
		for _, tc := range []struct {
			why          string
			env          spec
			node, global *api.FelixConfiguration
			want         string
		}{
			{"nothing set: Calico's default", spec{}, nil, nil, ""},
			{"default only", spec{}, nil, global, c.global},
			{"node over default", spec{}, node, global, c.node},
			{"node only", spec{}, node, nil, c.node},
			{"env over node and default", env, node, global, c.envJSON},
			{"env only", env, nil, nil, c.envJSON},
		} {
			got, problems := Effective(tc.env, tc.node, tc.global)
			if g := fieldJSON(got, st.name); g != tc.want {
				t.Errorf("%s (%s): %s, want %s", st.name, tc.why, g, tc.want)
			}
			if len(problems) > 0 {
				t.Errorf("%s (%s): problems %v", st.name, tc.why, problems)
			}
		}
		if v := settingValue(&spec{}, st); v != st.def {
			t.Errorf("%s unset reads %q, want Calico's default %q", st.name, v, st.def)
		}
		if c.bad == "" {
			continue
		}
		got, problems := Effective(spec{}, fc(t, "node.n1", st.name, c.bad), global)
		if g := fieldJSON(got, st.name); g != c.global {
			t.Errorf("%s: bad node value %s gave %s, want the default object's %s", st.name, c.bad, g, c.global)
		}
		if len(problems) != 1 || !strings.Contains(problems[0].Error(), "node.n1 spec."+st.name) {
			t.Errorf("%s: bad node value: problems %v, want one naming the object and field", st.name, problems)
		}
		if _, err := ParseFelixEnv([]string{st.env + "=" + strings.Trim(c.bad, `"`)}); c.bad != `[]` && !strings.HasPrefix(c.bad, "[") && (err == nil || !strings.Contains(err.Error(), st.env)) {
			t.Errorf("%s=%s: error %v, want one naming the variable", st.env, c.bad, err)
		}
		// What validation refuses at write is what the loader skips.
		if err := fc(t, "default", st.name, c.bad).Validate(); err == nil {
			t.Errorf("%s=%s: validation accepts what the loader refuses", st.name, c.bad)
		}
	}
	for name := range settingCases {
		if !slices.ContainsFunc(settings, func(s setting) bool { return s.name == name }) {
			t.Errorf("settingCases has %s, which is no setting", name)
		}
	}
}

func TestSettingsEnvErrorsAndUnknown(t *testing.T) {
	_, err := ParseFelixEnv([]string{"FELIX_VXLANPORT=abc", "Felix_LogSeverityScreen=loud", "FELIX_BPFENABLED=true", "FELIX_MTU=1400", "PATH=/bin"})
	for _, want := range []string{`FELIX_VXLANPORT="abc": must be an integer`, `Felix_LogSeverityScreen="loud": must be one of`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want it to contain %q", err, want)
		}
	}
	if err != nil && strings.Contains(err.Error(), "BPFENABLED") {
		t.Errorf("an unsupported variable is logged, not an error: %v", err)
	}
	if _, err := ParseFlags([]string{"--nodename", "n", "--log-level", "chatty"}, func(string) string { return "" }); err == nil || !strings.Contains(err.Error(), "--log-level") {
		t.Errorf("--log-level chatty: %v", err)
	}
	c, err := ParseFlags([]string{"--nodename", "n", "--log-level", "warn"}, func(k string) string { return map[string]string{"FELIX_LOGSEVERITYSCREEN": "debug"}[k] })
	if err != nil || c.FelixEnv.LogSeverityScreen != "Warning" {
		t.Errorf("--log-level warn over FELIX_LOGSEVERITYSCREEN=debug: %q %v", c.FelixEnv.LogSeverityScreen, err)
	}
}

// TestSettingsLoaderChanges: the loader recomputes on either object,
// ignores other nodes' objects, and names what changed.
func TestSettingsLoaderChanges(t *testing.T) {
	l := NewLoader("n1", spec{VXLANMTU: ptr(1300)})
	steps := []struct {
		u       calc.Update
		mine    bool
		changed []string
	}{
		{felixUpdate(fc(t, "default", "logSeverityScreen", `"Debug"`), false), true, []string{"logSeverityScreen"}},
		{felixUpdate(fc(t, "node.n2", "logSeverityScreen", `"Error"`), false), false, nil},
		{felixUpdate(fc(t, "node.n1", "logSeverityScreen", `"Error"`), false), true, []string{"logSeverityScreen"}},
		{felixUpdate(fc(t, "default", "vxlanMTU", `1400`), false), true, nil}, // env wins; the default object lost its logSeverityScreen, the node's still sets it
		{felixUpdate(fc(t, "node.n1", "", `0`), true), true, []string{"logSeverityScreen"}},
	}
	for i, s := range steps {
		mine, changed := l.Apply(s.u)
		if mine != s.mine || !slices.Equal(changed, s.changed) {
			t.Errorf("step %d: mine %v changed %v, want %v %v", i, mine, changed, s.mine, s.changed)
		}
	}
	if c := l.Current(); *c.VXLANMTU != 1300 || c.LogSeverityScreen != "" {
		t.Errorf("final %+v", c)
	}
}

func ptr[T any](v T) *T { return &v }

// TestRefreshSchedule: each refresh runs at its own interval, 0 turns one
// off, and a changed interval takes effect from the last run.
func TestRefreshSchedule(t *testing.T) {
	t0 := time.Unix(1000, 0)
	rs := NewRefreshes(t0)
	s := spec{IptablesRefreshInterval: &api.Duration{Duration: 10 * time.Second}, RouteRefreshInterval: &api.Duration{}}
	ran, next := DueRefreshes(rs, &s, nil, t0.Add(5*time.Second))
	if len(ran) != 0 || next != 5*time.Second {
		t.Errorf("at 5s: ran %v next %v, want nothing, next in 5s", ran, next)
	}
	ran, next = DueRefreshes(rs, &s, nil, t0.Add(10*time.Second))
	if !slices.Equal(ran, []string{"iptablesRefreshInterval"}) || next != 10*time.Second {
		t.Errorf("at 10s: ran %v next %v", ran, next)
	}
	ran, _ = DueRefreshes(rs, &s, nil, t0.Add(90*time.Second))
	if !slices.Equal(ran, []string{"iptablesRefreshInterval", "ipsetsRefreshInterval", "interfaceRefreshInterval"}) {
		t.Errorf("at 90s: ran %v (routes are off, the others at Calico's 90s)", ran)
	}
	// Unset, each runs at Calico's default: iptables 180 s, the others 90 s.
	def := NewRefreshes(t0)
	if ran, next := DueRefreshes(def, &spec{}, nil, t0.Add(90*time.Second)); !slices.Equal(ran,
		[]string{"routeRefreshInterval", "ipsetsRefreshInterval", "interfaceRefreshInterval"}) || next != 90*time.Second {
		t.Errorf("defaults at 90s: ran %v next %v, want all but iptables, next in 90s", ran, next)
	}
	if ran, _ := DueRefreshes(def, &spec{}, nil, t0.Add(180*time.Second)); len(ran) != 4 {
		t.Errorf("defaults at 180s: ran %v, want all four", ran)
	}
	s.RouteRefreshInterval = &api.Duration{Duration: time.Second}
	ran, next = DueRefreshes(rs, &s, nil, t0.Add(91*time.Second))
	if !slices.Equal(ran, []string{"routeRefreshInterval"}) || next != time.Second {
		t.Errorf("routes turned on at 1s: ran %v next %v", ran, next)
	}
}

// TestConfigurationDocListsEveryField: docs/CONFIGURATION.md has a row for
// every modelled FelixConfiguration field, and every setting the loader
// reads is there as honoured with its variable.
func TestConfigurationDocListsEveryField(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "CONFIGURATION.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	st := reflect.TypeFor[api.FelixConfigurationSpec]()
	for i := range st.NumField() {
		name, _, _ := strings.Cut(st.Field(i).Tag.Get("json"), ",")
		if !strings.Contains(doc, "| `"+name+"` |") {
			t.Errorf("docs/CONFIGURATION.md has no row for %s", name)
		}
	}
	// A setting some of whose values are refused (nftablesMode Enabled)
	// reads "refused unless <the values honoured>", as store/api's
	// TestDocsAgreeWithCode wants for a field in the refusals table.
	honoured := regexp.MustCompile("\\| `([a-zA-Z0-9]+)` \\| (?:honoured|refused unless [^|]+) \\| (FELIX_[A-Z0-9_]+) \\| live \\|")
	listed := map[string]string{}
	for _, m := range honoured.FindAllStringSubmatch(doc, -1) {
		listed[m[1]] = m[2]
	}
	for _, s := range settings {
		if listed[s.name] != s.env {
			t.Errorf("docs/CONFIGURATION.md does not list %s as honoured live with %s", s.name, s.env)
		}
	}
}
