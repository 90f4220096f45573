package api

import (
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
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
	},
	"BGPPeer": {
		never("spec.keepOriginalNextHop", "false"), never("spec.sourceAddress", "UseNodeIP"),
		never("spec.failureDetectionMode", "None"), never("spec.restartMode", "GracefulRestart"),
		never("spec.birdGatewayMode"), never("spec.numAllowedLocalASNumbers"), never("spec.ttlSecurity"),
		never("spec.reachableBy"), never("spec.filters"), never("spec.localWorkloadSelector"),
		never("spec.nextHopMode"),
	},
	"BGPConfiguration": {
		never("spec.logSeverityScreen", "Info"),
		never("spec.serviceLoadBalancerIPs"), never("spec.serviceExternalIPs"), never("spec.serviceClusterIPs"),
		never("spec.communities"), never("spec.prefixAdvertisements"),
		never("spec.nodeMeshPassword"), never("spec.nodeMeshMaxRestartTime"), never("spec.nodeMeshKeepaliveTime"),
		never("spec.bindMode", "None"), never("spec.ignoredInterfaces"),
		never("spec.localWorkloadPeeringIPV4"), never("spec.localWorkloadPeeringIPV6"),
		never("spec.programClusterRoutes", "Enabled"),
	},
	// The agent runs VXLAN and IP-in-IP but no WireGuard; Calico's nodes
	// record their WireGuard keys and addresses here, so that is
	// reported, not refused.
	"Node": {
		report("spec.wireguard"),
	},
	"ClusterInformation": {report("spec.datastoreReady", "true")},
	// Every other field is honoured (felix/settings.go,
	// docs/CONFIGURATION.md). These need what the agent does not have
	// (nftables, WireGuard, eBPF, XDP, flow logs): a value other than
	// Calico's default is refused.
	"FelixConfiguration": {
		never("spec.nftablesMode", "Disabled", "Auto"),

		never("spec.wireguardEnabled", "false"), never("spec.wireguardEnabledV6", "false"),
		never("spec.wireguardListeningPort"), never("spec.wireguardInterfaceName"), never("spec.wireguardMTU"),
		never("spec.bpfEnabled", "false"), never("spec.bpfLogLevel", "Off"), never("spec.xdpEnabled"),
		// Calico fields our types do not model (kept verbatim by
		// unmodelled.go, so an object from real Calico round-trips); the
		// agent does what Calico's default says and refuses the rest.
		calicoOnly("spec.flowLogsFlushInterval"), calicoOnly("spec.flowLogsFileEnabled", "false"),
	},
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
			if s := jsonText(v); !slices.Contains(rf.ok, s) {
				out = append(out, FieldProblem{Field: at, Value: s, Report: rf.report})
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
