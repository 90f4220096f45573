package rules

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/calico-aio/calico-aio/iptables"
	"github.com/calico-aio/calico-aio/store/api"
)

// TestKernelAcceptsRules loads everything the renderer produces, for every
// rule feature and both IP versions, into a fresh network namespace with
// the real ipset and iptables-restore: the kernel and the tools must
// accept every rule, and iptables-save must list them all.
func TestKernelAcceptsRules(t *testing.T) {
	for _, tool := range []string{"unshare", "ipset", "iptables-restore", "ip6tables-restore"} {
		if _, err := exec.LookPath(tool); err != nil || os.Geteuid() != 0 {
			if os.Getenv("CI") == "true" {
				t.Fatalf("needs root and %s: %v", tool, err)
			}
			t.Skipf("needs root and %s", tool)
		}
	}
	for _, v := range []int{4, 6} {
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) {
			in := bigInput(20, 20, 4)
			key := PolicyKey{Namespace: "prod", Name: "features"}
			var rs []api.Rule
			for _, fc := range featureCases {
				rs = append(rs, fc.rule)
			}
			in.Policies[key] = Policy{Key: key, Ingress: rs, Egress: rs}
			in.Endpoints[0].IngressPolicies = append(in.Endpoints[0].IngressPolicies, key)
			in.Endpoints[0].EgressPolicies = append(in.Endpoints[0].EgressPolicies, key)
			// Two tiers, a Pass one and a Deny one.
			in.Endpoints[1].IngressTiers = []Tier{
				{Name: "security", DefaultAction: api.ActionPass, Policies: []PolicyKey{key}},
				{Name: api.DefaultTierName, DefaultAction: api.ActionDeny, Policies: in.Endpoints[1].IngressPolicies},
			}
			in.Endpoints[0].NATs = sampleInput(v).Endpoints[0].NATs
			// Every QoS control, egress bandwidth beyond hashlimit's range.
			in.Endpoints[2].QoS = (&api.QoSControls{IngressPacketRate: 10000, EgressPacketRate: 1, IngressMaxConnections: 4294967295,
				EgressMaxConnections: 1, EgressBandwidth: 1_000_000_000_000_000, EgressPeakrate: 1_010_000_000_000_000, EgressMinburst: 1000}).WithDefaults()
			in.Endpoints[3].QoS = (&api.QoSControls{EgressBandwidth: 1000, EgressBurst: 1000, IngressPacketRate: 1, IngressPacketBurst: 10000}).WithDefaults()
			in.Endpoints[0].AllowSpoofedFrom = append(in.Endpoints[0].AllowSpoofedFrom, pfx("192.168.0.0/24"), pfx("fd00:1::/64"))
			sample := sampleInput(v)
			in.NATOutgoingPools, in.AllPools = sample.NATOutgoingPools, sample.AllPools
			in.HostEndpoints = hostInput().HostEndpoints
			for k, p := range hostInput().Policies {
				in.Policies[k] = p
			}
			in.Profiles["open"] = hostInput().Profiles["open"]
			tb, sets := Render(Config{IPVersion: v, PoliceEgressBandwidth: true}, in)
			if len(tb.Raw) == 0 || len(tb.Mangle) == 0 {
				t.Fatalf("host endpoints rendered no raw or mangle chains")
			}
			loadInNetns(t, v, tb, sets)
			// The FelixConfiguration options that change the rules: REJECT,
			// no INVALID rule, the hosts set and an interface in NAT
			// outgoing, a log prefix of the longest length allowed.
			tb, sets = Render(Config{IPVersion: v, FilterDenyAction: "Reject", DisableConntrackInvalid: true,
				NATOutgoingExcludeHosts: true, NATOutgoingInterface: "eth+", LogPrefix: "node-1 x/y_z:" + strings.Repeat("q", 14)}, in)
			loadInNetns(t, v, tb, sets)
		})
	}
}

func loadInNetns(t *testing.T, v int, tb Tables, sets []IPSetSpec) {
	dir := t.TempDir()
	var ips strings.Builder
	family := "inet"
	if v == 6 {
		family = "inet6"
	}
	for _, s := range sets {
		typ := "hash:net"
		if s.Kind == IPSetNamedPort {
			typ = "hash:ip,port"
		}
		fmt.Fprintf(&ips, "create %s %s family %s\n", s.Name, typ, family)
	}
	var rules strings.Builder
	want := 0
	for _, table := range []struct {
		name   string
		chains []iptables.Chain
	}{{"filter", tb.Filter}, {"nat", tb.NAT}, {"mangle", tb.Mangle}, {"raw", tb.Raw}} {
		if len(table.chains) == 0 {
			continue
		}
		rules.WriteString("*" + table.name + "\n")
		for _, c := range table.chains {
			rules.WriteString(":" + c.Name + " - [0:0]\n")
		}
		for _, c := range table.chains {
			for _, r := range c.Rules {
				want++
				line := "-A " + c.Name
				if r.Match != "" {
					line += " " + r.Match
				}
				line += ` -m comment --comment "cali:test"`
				if r.Comment != "" {
					line += ` -m comment --comment "` + r.Comment + `"`
				}
				rules.WriteString(line + " " + r.Action + "\n")
			}
		}
		rules.WriteString("COMMIT\n")
	}
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	setsFile, rulesFile := write("ipsets", ips.String()), write("rules", rules.String())
	restore, save := "iptables-restore", "iptables-save"
	if v == 6 {
		restore, save = "ip6tables-restore", "ip6tables-save"
	}
	script := fmt.Sprintf("ipset restore < %s && %s < %s && %s", setsFile, restore, rulesFile, save)
	out, err := exec.Command("unshare", "--net", "sh", "-c", script).CombinedOutput()
	if err != nil {
		t.Fatalf("loading the rules: %v\n%s", err, out)
	}
	if got := strings.Count(string(out), "\n-A cali-"); got != want {
		t.Errorf("iptables-save lists %d of our rules, want %d", got, want)
	}
}
