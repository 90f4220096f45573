package api

import (
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// Every stored field is honoured or refused (issue #13, docs/POLICY.md).
// The table below lists the fields nothing in this agent acts on. A write
// that sets one to anything but the values listed as what we do anyway is
// refused by Validate, naming the field. Fields marked report are not
// refused (Calico's own node agents write them on shared objects, and our
// writers must be able to write such objects back); the agent logs and
// counts objects that carry them, as it does for every unsupported field in
// objects another tool wrote past our validation.

// FieldProblem is one field set to a value this agent does not honour.
type FieldProblem struct {
	Field  string // "spec.ingress[0].http"
	Value  string // the value as JSON text (strings unquoted)
	Report bool   // logged and counted, not refused at write
}

func (p FieldProblem) String() string { return p.Field + "=" + p.Value }

// refusal is one unsupported field of a kind: a path of JSON member names
// where "[]" stands for every element of an array. Values in ok are what
// the agent does anyway and pass.
type refusal struct {
	path       string
	ok         []string
	report     bool
	unmodelled bool // a Calico field our types have no member for
}

// ruleKind is the pseudo-kind whose refusals apply to every rule of a
// policy or profile, under spec.ingress[i] and spec.egress[i].
const ruleKind = "Rule"

// rulesKinds are the kinds whose rules the Rule refusals apply to. Staged
// policies are never enforced, so nothing in them is unsupported.
var rulesKinds = []string{"NetworkPolicy", "GlobalNetworkPolicy", "Profile"}

func never(path string, ok ...string) refusal { return refusal{path: path, ok: ok} }

// calicoOnly refuses a Calico field our types do not model (unmodelled.go
// keeps it verbatim) when set to anything but ok.
func calicoOnly(path string, ok ...string) refusal {
	return refusal{path: path, ok: ok, unmodelled: true}
}
func report(path string, ok ...string) refusal {
	return refusal{path: path, ok: ok, report: true}
}

// refusals is the table of unsupported fields by kind.
var refusals = map[string][]refusal{
	ruleKind: {
		never("http"),
	},
	"IPPool": {
		// VXLAN and IP-in-IP are honoured (docs/OVERLAY.md).
		never("spec.disableBGPExport", "false"), never("spec.namespaceSelector"),
		// Nothing here allocates LoadBalancer addresses (Calico's
		// kube-controllers does): such a pool would sit unused.
		never("spec.allowedUses[]", "Workload", "Tunnel"),
	},
	"BGPPeer": {
		never("spec.keepOriginalNextHop", "false"), never("spec.sourceAddress", "UseNodeIP"),
		never("spec.failureDetectionMode", "None"), never("spec.restartMode", "GracefulRestart"),
		never("spec.birdGatewayMode"), never("spec.numAllowedLocalASNumbers"), never("spec.ttlSecurity"),
		never("spec.reachableBy"), never("spec.filters"), never("spec.localWorkloadSelector"),
		never("spec.nextHopMode"),
	},
	"BGPConfiguration": {
		never("spec.serviceLoadBalancerIPs"), never("spec.serviceExternalIPs"), never("spec.serviceClusterIPs"),
		never("spec.communities"), never("spec.prefixAdvertisements"),
		never("spec.nodeMeshPassword"), never("spec.nodeMeshMaxRestartTime"), never("spec.nodeMeshKeepaliveTime"),
		never("spec.bindMode", "None"), never("spec.ignoredInterfaces"),
		never("spec.localWorkloadPeeringIPV4"), never("spec.localWorkloadPeeringIPV6"),
		// No serviceLoadBalancerIPs are advertised (refused above), so
		// aggregating them or not changes nothing.
		calicoOnly("spec.serviceLoadBalancerAggregation", "Enabled", "Disabled"),
	},
	// The agent runs VXLAN and IP-in-IP but no WireGuard; Calico's nodes
	// record their WireGuard keys and addresses here, so that is
	// reported, not refused.
	"Node": {
		report("spec.wireguard"),
	},
	"ClusterInformation": {report("spec.datastoreReady", "true")},
	// DiffServ marking (qos.projectcalico.org/dscp): the rest of
	// qosControls is honoured (docs/QOS.md).
	"WorkloadEndpoint": {calicoOnly("spec.qosControls.dscp")},
	// Every other field is honoured (felix/config/settings.go,
	// docs/CONFIGURATION.md). These need what the agent does not have
	// (nftables, WireGuard, eBPF, XDP, flow logs): a value other than
	// Calico's default is refused.
	// (Auto, Calico's default, runs iptables where nftables is not in use:
	// what the agent does.)
	"FelixConfiguration": append([]refusal{
		never("spec.nftablesMode", "Disabled", "Auto"),

		never("spec.wireguardEnabled", "false"), never("spec.wireguardEnabledV6", "false"),
		never("spec.wireguardListeningPort", "51820"), never("spec.wireguardInterfaceName", "wireguard.cali"),
		never("spec.wireguardMTU", "1440"),
		never("spec.bpfEnabled", "false"), never("spec.bpfLogLevel", "Off", ""),
		// Not a v3.32 field (strict decoding refuses it from calicoctl);
		// kept for objects older writers stored.
		calicoOnly("spec.flowLogsFileEnabled", "false"),
	}, felixCalicoOnly...), // unsupported_felix.go
}

// Unsupported returns the fields of r set to values this agent does not
// honour, sorted by field. It is pure: the write path refuses what it
// returns (but the Report ones); the agent logs and counts it for objects
// others wrote.
func Unsupported(r Resource) []FieldProblem {
	b, err := Marshal(r) // with the members our types do not model
	if err != nil {
		return nil
	}
	var obj map[string]any
	if json.Unmarshal(b, &obj) != nil {
		return nil
	}
	kind := r.GetTypeMeta().Kind
	var out []FieldProblem
	for _, rf := range refusals[kind] {
		out = append(out, rf.find(obj, "")...)
	}
	if slices.Contains(rulesKinds, kind) {
		spec, _ := obj["spec"].(map[string]any)
		for _, dir := range []string{"ingress", "egress"} {
			rules, _ := spec[dir].([]any)
			for i, rule := range rules {
				for _, rf := range refusals[ruleKind] {
					out = append(out, rf.find(rule, idx("spec."+dir, i)+".")...)
				}
			}
		}
	}
	slices.SortFunc(out, func(a, b FieldProblem) int { return strings.Compare(a.Field, b.Field) })
	return out
}

// unsupportedErr is the write-time refusal of r's unsupported fields.
func unsupportedErr(r Resource) error {
	var errs []error
	for _, p := range Unsupported(r) {
		if !p.Report {
			errs = append(errs, &FieldError{Field: p.Field, Value: p.Value,
				Msg: "is not supported by this agent (it would be stored and ignored); see docs/POLICY.md"})
		}
	}
	return errors.Join(errs...)
}

// find reports the members of v at rf.path (under prefix) whose value is
// set and not one of rf.ok.
func (rf refusal) find(v any, prefix string) []FieldProblem {
	var out []FieldProblem
	var walk func(v any, segs []string, at string)
	walk = func(v any, segs []string, at string) {
		if len(segs) == 0 {
			if !rf.accepts(v) {
				out = append(out, FieldProblem{Field: at, Value: jsonText(v), Report: rf.report})
			}
			return
		}
		m, ok := v.(map[string]any)
		if !ok {
			return
		}
		name, each := strings.CutSuffix(segs[0], "[]")
		child, ok := m[name]
		if !ok || child == nil {
			return
		}
		sep := "."
		if at == "" || strings.HasSuffix(at, ".") {
			sep = ""
		}
		here := at + sep + name
		if !each {
			walk(child, segs[1:], here)
			return
		}
		items, _ := child.([]any)
		for i, it := range items {
			walk(it, segs[1:], idx(here, i))
		}
	}
	walk(v, strings.Split(rf.path, "."), prefix)
	return out
}

// accepts says whether v is unset (empty) or one of rf.ok: a word in any
// case (Calico's Felix reads its enumerations so), a duration of the same
// length ("1m30s" is "90s").
func (rf refusal) accepts(v any) bool {
	switch x := v.(type) {
	case string:
		if x == "" {
			return true
		}
	case []any:
		if len(x) == 0 {
			return true
		}
	case map[string]any:
		if len(x) == 0 {
			return true
		}
	}
	s := jsonText(v)
	for _, ok := range rf.ok {
		if s == ok || isWord(ok) && strings.EqualFold(s, ok) {
			return true
		}
		d1, err1 := time.ParseDuration(s)
		d2, err2 := time.ParseDuration(ok)
		if err1 == nil && err2 == nil && d1 == d2 {
			return true
		}
	}
	return false
}

// isWord says whether s is letters only.
func isWord(s string) bool {
	return s != "" && strings.IndexFunc(s, func(r rune) bool { return !unicode.IsLetter(r) }) < 0
}

// jsonText renders a decoded JSON value: strings bare, others as JSON.
func jsonText(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case bool:
		return strconv.FormatBool(x)
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// unsupported adds the write-time refusal of r's unsupported fields.
func (f *fieldErrs) unsupported(r Resource) {
	if err := unsupportedErr(r); err != nil {
		f.errs = append(f.errs, err)
	}
}
