package api

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// onlyUnsupported says whether every error joined in err is a refusal of an
// unsupported field.
func onlyUnsupported(err error) bool {
	var flat func(error) []error
	flat = func(e error) []error {
		if j, ok := e.(interface{ Unwrap() []error }); ok {
			var out []error
			for _, x := range j.Unwrap() {
				out = append(out, flat(x)...)
			}
			return out
		}
		return []error{e}
	}
	for _, e := range flat(err) {
		var fe *FieldError
		if !errors.As(e, &fe) || !strings.Contains(fe.Msg, "is not supported by this agent") {
			return false
		}
	}
	return true
}

// Field coverage (issue #13). Every field path of every kind is in exactly
// one list: enforced (with the test that shows it), refused or reported
// (the refusals table in unsupported.go), delegated (owned by the tiers
// work), acted on but not yet shown by a test, or without behaviour.
// Paths are JSON names with [] for array elements; a rule's fields are
// listed once under "Rule.".

// enforced maps a field to a test that shows the agent acting on it.
var enforced = map[string]string{
	"Rule.action": "TestRuleFeatures", "Rule.ipVersion": "TestRuleFeatures", "Rule.protocol": "TestRuleFeatures",
	"Rule.notProtocol": "TestRuleFeatures", "Rule.icmp.type": "TestRuleFeatures", "Rule.icmp.code": "TestRuleFeatures",
	"Rule.notICMP.type": "TestRuleFeatures", "Rule.notICMP.code": "TestRuleFeatures",
	"Rule.source.nets": "TestRuleFeatures", "Rule.source.notNets": "TestRuleFeatures",
	"Rule.source.selector": "TestRuleFeatures", "Rule.source.notSelector": "TestRuleFeatures",
	"Rule.source.namespaceSelector": "TestRuleFeatures", "Rule.source.ports": "TestRuleFeatures",
	"Rule.source.notPorts": "TestRuleFeatures", "Rule.source.serviceAccounts.names": "TestRuleFeatures",
	"Rule.source.serviceAccounts.selector": "TestServiceAccountSelectors", "Rule.destination.serviceAccounts.selector": "TestServiceAccountSelectors",
	"NetworkPolicy.spec.serviceAccountSelector": "TestServiceAccountSelectors", "GlobalNetworkPolicy.spec.serviceAccountSelector": "TestServiceAccountSelectors",
	"Rule.destination.nets": "TestRuleFeatures", "Rule.destination.notNets": "TestRuleFeatures",
	"Rule.destination.selector": "TestRuleFeatures", "Rule.destination.notSelector": "TestRuleFeatures",
	"Rule.destination.namespaceSelector": "TestRuleFeatures", "Rule.destination.ports": "TestRuleFeatures",
	"Rule.destination.notPorts": "TestRuleFeatures", "Rule.destination.serviceAccounts.names": "TestRuleFeatures",
	// Services (k8s/controller/services.go publishes the endpoints,
	// felix/calc/services.go makes the sets, felix/rules matches them).
	"Rule.source.services.name": "TestPolicyServicesTraffic", "Rule.source.services.namespace": "TestPolicyServicesTraffic",
	"Rule.destination.services.name": "TestPolicyServicesTraffic", "Rule.destination.services.namespace": "TestPolicyServicesTraffic",

	"IPPool.spec.assignmentMode":                  "TestPoolSelection",
	"BGPPeer.spec.keepaliveTime":                  "TestDesiredPeersTimersPortAndSecrets",
	"BGPPeer.spec.maxRestartTime":                 "TestDesiredPeersTimersPortAndSecrets",
	"BGPPeer.spec.password.secretKeyRef.optional": "TestDesiredPeersTimersPortAndSecrets",
	"BGPConfiguration.spec.listenPort":            "TestDesiredPeersTimersPortAndSecrets",

	"NetworkPolicy.spec.order": "TestPolicyTrafficPassAndOrder", "NetworkPolicy.spec.selector": "TestPolicySelectionAndOrder",
	"NetworkPolicy.spec.types": "TestPolicySelectionAndOrder", "NetworkPolicy.spec.ingress": "TestPolicyTrafficSelector",
	"NetworkPolicy.spec.egress":                  "TestAgentEnforcesPolicy",
	"GlobalNetworkPolicy.spec.order":             "TestPolicySelectionAndOrder",
	"GlobalNetworkPolicy.spec.selector":          "TestPolicySelectionAndOrder",
	"GlobalNetworkPolicy.spec.types":             "TestPolicySelectionAndOrder",
	"GlobalNetworkPolicy.spec.ingress":           "TestPolicyTrafficSelector",
	"GlobalNetworkPolicy.spec.egress":            "TestPolicyTrafficDefaultDeny",
	"GlobalNetworkPolicy.spec.namespaceSelector": "TestPolicyTrafficNamespaces",
	"Profile.spec.ingress":                       "TestPolicyTrafficProfiles",
	"Profile.spec.egress":                        "TestPolicyTrafficProfiles",
	"Profile.spec.labelsToApply":                 "TestProfileLabelInheritance",

	"WorkloadEndpoint.spec.node":                       "TestAgentEnforcesPolicy",
	"WorkloadEndpoint.spec.ipNetworks":                 "TestAgentEnforcesPolicy",
	"WorkloadEndpoint.spec.interfaceName":              "TestAgentEnforcesPolicy",
	"WorkloadEndpoint.spec.mac":                        "TestCNIWiringDetails",
	"WorkloadEndpoint.spec.profiles":                   "TestPolicyTrafficProfiles",
	"WorkloadEndpoint.spec.ipNATs[].internalIP":        "TestPolicyTrafficFloatingIP",
	"WorkloadEndpoint.spec.ipNATs[].externalIP":        "TestPolicyTrafficFloatingIP",
	"WorkloadEndpoint.spec.ports[].name":               "TestNamedPortSet",
	"WorkloadEndpoint.spec.ports[].protocol":           "TestNamedPortSet",
	"WorkloadEndpoint.spec.ports[].port":               "TestNamedPortSet",
	"WorkloadEndpoint.spec.allowSpoofedSourcePrefixes": "TestPolicyTrafficAntiSpoof",
	"WorkloadEndpoint.spec.serviceAccountName":         "TestServiceAccountToProfile",

	"NetworkSet.spec.nets":       "TestIPSetMembershipIncremental",
	"GlobalNetworkSet.spec.nets": "TestPolicyTrafficCIDR",

	"IPPool.spec.cidr":         "TestPoolSelection",
	"IPPool.spec.natOutgoing":  "TestPolicyTrafficNATOutgoing",
	"IPPool.spec.disabled":     "TestPoolSelection",
	"IPPool.spec.blockSize":    "TestAutoAssignClaimsBlockInCalicoLayout",
	"IPPool.spec.nodeSelector": "TestPoolSelection",
	"IPPool.spec.allowedUses":  "TestPoolSelection",
	"IPPool.spec.vxlanMode":    "TestOverlayVXLANTwoSubnets",

	// VXLAN (docs/OVERLAY.md).
	"Node.spec.ipv4VXLANTunnelAddr":        "TestTunnelAddrLifecycle",
	"Node.spec.ipv6VXLANTunnelAddr":        "TestTunnelAddrLifecycle",
	"Node.spec.vxlanTunnelMACAddrV6":       "TestOverlayDesiredIPv6",
	"FelixConfiguration.spec.vxlanMTUV6":   "TestOverlayDesiredIPv6",
	"Node.spec.vxlanTunnelMACAddr":         "TestOverlayDesiredAlways",
	"FelixConfiguration.spec.vxlanEnabled": "TestOverlayFelixConfig",
	"FelixConfiguration.spec.vxlanPort":    "TestVXLANDeviceKernel",
	"FelixConfiguration.spec.vxlanVNI":     "TestVXLANDeviceKernel",
	"FelixConfiguration.spec.vxlanMTU":     "TestVXLANDeviceKernel",

	// IP-in-IP (docs/OVERLAY.md).
	"IPPool.spec.ipipMode":                "TestAddIPIPRoutes",
	"Node.spec.bgp.ipv4IPIPTunnelAddr":    "TestIPIPTunnelAddrLifecycle",
	"FelixConfiguration.spec.ipipEnabled": "TestOverlayIPIP",
	"FelixConfiguration.spec.ipipMTU":     "TestOverlayIPIP",
	// Encapsulated packets from workloads (felix/rules).
	"FelixConfiguration.spec.allowVXLANPacketsFromWorkloads": "TestEncapFromWorkloadsKernel",
	"FelixConfiguration.spec.allowIPIPPacketsFromWorkloads":  "TestEncapFromWorkloads",

	"BGPPeer.spec.node":                           "TestDesiredPeersPeerIPReverse",
	"BGPPeer.spec.nodeSelector":                   "TestDesiredPeersPeerSelectorReverse",
	"BGPPeer.spec.peerIP":                         "TestDesiredPeersPeerIPReverse",
	"BGPPeer.spec.asNumber":                       "TestBIRDAsPlainPeer",
	"BGPPeer.spec.peerSelector":                   "TestDesiredPeersPeerSelectorReverse",
	"BGPPeer.spec.password.secretKeyRef.name":     "TestMD5",
	"BGPPeer.spec.password.secretKeyRef.key":      "TestMD5",
	"BGPConfiguration.spec.nodeToNodeMeshEnabled": "TestClusterRouteReflectorMeshOff",
	"BGPConfiguration.spec.asNumber":              "TestBIRDAsPlainPeer",

	"Node.spec.bgp.asNumber":                "TestBIRDAsPlainPeer",
	"Node.spec.bgp.ipv4Address":             "TestClusterCrossNodeTraffic",
	"Node.spec.bgp.ipv6Address":             "TestClusterIPv6CrossNode",
	"Node.spec.bgp.routeReflectorClusterID": "TestClusterRouteReflectorMeshOff",

	"FelixConfiguration.spec.defaultEndpointToHostAction": "TestEndpointToHostAction",
	"FelixConfiguration.spec.failsafeInboundHostPorts":    "TestFailsafeDefaults",
	"FelixConfiguration.spec.failsafeOutboundHostPorts":   "TestFailsafeDefaults",
	"FelixConfiguration.spec.ipForwarding":                "TestDataplaneIPForwarding",
	"FelixConfiguration.spec.mtuIfacePattern":             "TestMTUFromHostInterfaces",
	"FelixConfiguration.spec.logSeverityScreen":           "TestSettingsLogSeverityLive",
	"FelixConfiguration.spec.logFilePath":                 "TestSettingsLogFileLive",
	"FelixConfiguration.spec.logSeverityFile":             "TestSettingsLogFileLive",
	"FelixConfiguration.spec.iptablesRefreshInterval":     "TestConfigRefreshIntervalsLive",
	"FelixConfiguration.spec.chainInsertMode":             "TestConfigChainInsertModeLive",
	"FelixConfiguration.spec.natOutgoingAddress":          "TestConfigNATOutgoingLive",
	"FelixConfiguration.spec.natPortRange":                "TestConfigNATOutgoingLive",
	"FelixConfiguration.spec.kubeNodePortRanges":          "TestConfigKubeNodePortRangesLive",
	"FelixConfiguration.spec.iptablesMarkMask":            "TestConfigMarkMaskLive",
	"FelixConfiguration.spec.iptablesFilterAllowAction":   "TestConfigFilterAllowActionLive",
	"FelixConfiguration.spec.iptablesBackend":             "TestConfigIPTablesBackendLive",
	"FelixConfiguration.spec.removeExternalRoutes":        "TestConfigRemoveExternalRoutesLive",
	"FelixConfiguration.spec.iptablesMangleAllowAction":   "TestConfigMangleAllowActionLive",
	"FelixConfiguration.spec.healthEnabled":               "TestSettingsServersLive",
	"FelixConfiguration.spec.healthHost":                  "TestSettingsServersLive",
	"FelixConfiguration.spec.healthPort":                  "TestSettingsServersLive",
	"FelixConfiguration.spec.prometheusMetricsEnabled":    "TestSettingsServersLive",
	"FelixConfiguration.spec.prometheusMetricsHost":       "TestSettingsServersLive",
	"FelixConfiguration.spec.prometheusMetricsPort":       "TestSettingsServersLive",
	"FelixConfiguration.spec.floatingIPs":                 "TestPolicyTrafficFloatingIP",
	"FelixConfiguration.spec.prometheusMetricsCertFile":   "TestSettingsMetricsTLSLive",
	"FelixConfiguration.spec.prometheusMetricsKeyFile":    "TestSettingsMetricsTLSLive",
	"FelixConfiguration.spec.prometheusMetricsCAFile":     "TestSettingsMetricsTLSLive",
	"FelixConfiguration.spec.routeRefreshInterval":        "TestConfigRefreshIntervalsLive",
	"FelixConfiguration.spec.ipsetsRefreshInterval":       "TestConfigRefreshIntervalsLive",
	"FelixConfiguration.spec.interfaceRefreshInterval":    "TestConfigRefreshIntervalsLive",
	"FelixConfiguration.spec.reportingInterval":           "TestStatusReportingLive",
	"FelixConfiguration.spec.reportingTTL":                "TestStatusReportingLive",
	"FelixConfiguration.spec.endpointReportingEnabled":    "TestStatusReportingLive",
	"FelixConfiguration.spec.endpointReportingDelay":      "TestStatusReportingLive",
	"FelixConfiguration.spec.iptablesLockTimeout":         "TestConfigIPTablesLockLive",
	"FelixConfiguration.spec.netlinkTimeout":              "TestConfigNetlinkTimeoutLive",
	"FelixConfiguration.spec.iptablesLockProbeInterval":   "TestConfigIPTablesLockLive",
	"FelixConfiguration.spec.ipv6Support":                 "TestConfigIPv6SupportLive",
	"FelixConfiguration.spec.logSeveritySys":              "TestSettingsLogSyslogLive",
	"FelixConfiguration.spec.maxIpsetSize":                "TestConfigMaxIpsetSizeLive",

	// Policy rendering (felix/rules, issue #15).
	"FelixConfiguration.spec.iptablesFilterDenyAction":           "TestDenyActionKernel",
	"FelixConfiguration.spec.disableConntrackInvalidCheck":       "TestConntrackInvalidKernel",
	"FelixConfiguration.spec.natOutgoingExclusions":              "TestNATOutgoingExclusionsKernel",
	"FelixConfiguration.spec.iptablesNATOutgoingInterfaceFilter": "TestNATOutgoingInterfaceKernel",
	"FelixConfiguration.spec.workloadSourceSpoofing":             "TestPolicyTrafficAntiSpoof",
	"FelixConfiguration.spec.logPrefix":                          "TestLogPrefixKernel",
	"FelixConfiguration.spec.serviceLoopPrevention":              "TestServiceLoopPreventionRendersNothing",

	// Routes to local workloads and workload interfaces (felix/dataplane).
	"FelixConfiguration.spec.deviceRouteSourceAddress":     "TestConfigDeviceRouteSourceLive",
	"FelixConfiguration.spec.deviceRouteSourceAddressIPv6": "TestConfigDeviceRouteSourceLive",
	"FelixConfiguration.spec.deviceRouteProtocol":          "TestConfigDeviceRouteProtocolLive",
	"FelixConfiguration.spec.interfacePrefix":              "TestConfigInterfacePrefixLive",
	"FelixConfiguration.spec.interfaceExclude":             "TestConfigInterfaceExcludeLive",
	"FelixConfiguration.spec.routeTableRange":              "TestRouteTableRangesLeftAlone",
	"FelixConfiguration.spec.routeTableRanges":             "TestRouteTableRangesLeftAlone",
	"FelixConfiguration.spec.routeSource":                  "TestConfigRouteSourceLive",

	// Host endpoints (felix/calc/hostendpoints.go, felix/rules/hostendpoint.go).
	"HostEndpoint.spec.node":                  "TestHostEndpointSelection",
	"HostEndpoint.spec.interfaceName":         "TestHostEndpointFailsafeTraffic",
	"HostEndpoint.spec.expectedIPs":           "TestHostEndpointExpectedIPsTraffic",
	"HostEndpoint.spec.profiles":              "TestHostEndpointSelection",
	"HostEndpoint.spec.ports[].name":          "TestHostEndpointNamedPorts",
	"HostEndpoint.spec.ports[].protocol":      "TestHostEndpointNamedPorts",
	"HostEndpoint.spec.ports[].port":          "TestHostEndpointNamedPorts",
	"GlobalNetworkPolicy.spec.applyOnForward": "TestHostEndpointApplyOnForwardTraffic",
	"GlobalNetworkPolicy.spec.preDNAT":        "TestHostEndpointPreDNATTraffic",
	"GlobalNetworkPolicy.spec.doNotTrack":     "TestHostEndpointDoNotTrackTraffic",

	// Endpoint status files for the CNI policy wait (felix/status/files.go).
	"FelixConfiguration.spec.endpointStatusPathPrefix": "TestCNIPolicySetupWait",
}

// Issue #22: FelixConfiguration fields the agent honours (h/felixcfg).
func init() {
	for field, test := range map[string]string{
		"FelixConfiguration.spec.prometheusGoMetricsEnabled":      "TestSettingsRuntimeMetricsLive",
		"FelixConfiguration.spec.prometheusProcessMetricsEnabled": "TestSettingsRuntimeMetricsLive",
		"FelixConfiguration.spec.logActionRateLimit":              "TestLogActionRateLimitKernel",
		"FelixConfiguration.spec.logActionRateLimitBurst":         "TestLogActionRateLimitKernel",
		"FelixConfiguration.spec.routeSyncDisabled":               "TestConfigRouteSyncDisabledLive",
		"FelixConfiguration.spec.healthTimeoutOverrides":          "TestHealthTimeoutOverridesLive",
		"FelixConfiguration.spec.nodeSelector":                    "TestSettingsNodeSelectorScoped",
		"FelixConfiguration.spec.ipv4NormalRoutePriority":         "TestConfigRoutePriorityLive",
		"FelixConfiguration.spec.ipv6NormalRoutePriority":         "TestRouteMetricKernel",
		"FelixConfiguration.spec.ipv4ElevatedRoutePriority":       "TestRoutePrioritySettings",
		"FelixConfiguration.spec.ipv6ElevatedRoutePriority":       "TestRoutePrioritySettings",
	} {
		enforced[field] = test
	}
}

// Issue #22 item 2: cluster routes programmed by the agent (h/pcr).
func init() {
	enforced["FelixConfiguration.spec.programClusterRoutes"] = "TestProgramClusterRoutes"
	enforced["BGPConfiguration.spec.programClusterRoutes"] = "TestProgramClusterRoutes"
}

// untested are acted on by code (named) but no test shows it yet: debt,
// listed so it cannot be forgotten.
var untested = map[string]string{}

// delegated are owned by the tiers work (store/api/tier.go, felix/calc,
// felix/rules), enforced there.
var delegated = []string{
	"NetworkPolicy.spec.tier", "GlobalNetworkPolicy.spec.tier",
	"Tier.spec.order", "Tier.spec.defaultAction",
}

// noBehaviour are data: identity, descriptions, status, hints.
var noBehaviour = []string{
	"*.metadata",                                                                       // name/namespace key the object; labels feed selectors (enforced with them); the rest is bookkeeping
	"NetworkPolicy.spec.performanceHints", "GlobalNetworkPolicy.spec.performanceHints", // a hint: nothing to enforce
	"WorkloadEndpoint.spec.orchestrator", "WorkloadEndpoint.spec.workload", "WorkloadEndpoint.spec.containerID",
	"WorkloadEndpoint.spec.pod", "WorkloadEndpoint.spec.endpoint", // identity
	"WorkloadEndpoint.spec.ipv4Gateway", "WorkloadEndpoint.spec.ipv6Gateway", // informational, as in Calico
	"WorkloadEndpoint.spec.ipNATs[].source",
	"WorkloadEndpoint.spec.ports[].hostPort", "WorkloadEndpoint.spec.ports[].hostIP", // the portmap plugin's, as in Calico (TestCNIChainedWithPortmap)
	"Node.spec.orchRefs", "Node.spec.addresses", "Node.spec.interfaces", "Node.status",
	"ClusterInformation.spec.clusterGUID", "ClusterInformation.spec.clusterType",
	"ClusterInformation.spec.calicoVersion", "ClusterInformation.spec.variant",
	"Tier.status",
	// XDP only speeds up untracked deny policy on host endpoints, which the
	// agent enforces in iptables (raw) whatever this says.
	"FelixConfiguration.spec.xdpEnabled",
	// The agent never reports usage to Calico's servers; true is Calico's
	// default (always accepted), false is what the agent does.
	"FelixConfiguration.spec.usageReportingEnabled",
	// Staged policies are never enforced, as in Calico.
	"StagedNetworkPolicy.spec", "StagedGlobalNetworkPolicy.spec", "StagedKubernetesNetworkPolicy.spec",
}

// fieldPaths walks t's JSON members: leaves (and opaque values, maps) are
// paths; a Rule is one "rules" path whose fields are the Rule kind's.
func fieldPaths(t reflect.Type, prefix string, out map[string]reflect.Type) {
	t = deref(t)
	if prefix != "" && (opaque(t) || t.Kind() != reflect.Struct && t.Kind() != reflect.Slice) || t == reflect.TypeFor[Rule]() && prefix != "" {
		out[prefix] = t
		return
	}
	if t.Kind() == reflect.Slice {
		if et := deref(t.Elem()); et.Kind() == reflect.Struct && !opaque(et) && et != reflect.TypeFor[Rule]() {
			fieldPaths(et, prefix+"[]", out)
			return
		}
		out[prefix] = t
		return
	}
	fields := map[string]reflect.Type{}
	jsonFields(t, fields)
	for name, ft := range fields {
		if name == "kind" || name == "apiVersion" {
			continue
		}
		p := name
		if prefix != "" {
			p = prefix + "." + name
		}
		fieldPaths(ft, p, out)
	}
}

// listed says which lists hold path (a list entry covers its sub-paths).
func listed(path, kind string) []string {
	under := func(entry string) bool {
		entry = strings.Replace(entry, "*.", kind+".", 1)
		return path == entry || strings.HasPrefix(path, entry+".") || strings.HasPrefix(path, entry+"[]")
	}
	var in []string
	for p := range enforced {
		if under(p) {
			in = append(in, "enforced")
		}
	}
	for p := range untested {
		if under(p) {
			in = append(in, "untested")
		}
	}
	for k, rs := range refusals {
		for _, r := range rs {
			if under(k + "." + r.path) {
				in = append(in, "refused")
			}
		}
	}
	for _, p := range delegated {
		if under(p) {
			in = append(in, "delegated")
		}
	}
	for _, p := range noBehaviour {
		if under(p) {
			in = append(in, "none")
		}
	}
	return in
}

func allPaths() map[string]reflect.Type {
	paths := map[string]reflect.Type{}
	for _, k := range Kinds() {
		sub := map[string]reflect.Type{}
		fieldPaths(reflect.TypeOf(k.New()), "", sub)
		for p, t := range sub {
			paths[k.Kind+"."+p] = t
		}
	}
	sub := map[string]reflect.Type{}
	fieldPaths(reflect.TypeFor[Rule](), "", sub)
	for p, t := range sub {
		paths[ruleKind+"."+p] = t
	}
	return paths
}

func TestEveryFieldEnforcedOrRefused(t *testing.T) {
	paths := allPaths()
	if len(paths) < 200 {
		t.Fatalf("walked only %d field paths: the walker is broken", len(paths))
	}
	for _, p := range slices.Sorted(mapKeys(paths)) {
		kind, _, _ := strings.Cut(p, ".")
		switch in := listed(p, kind); len(in) {
		case 0:
			t.Errorf("%s is in no list: enforce it (and name the test), refuse it, or say why it has no behaviour", p)
		case 1:
		default:
			t.Errorf("%s is in several lists: %v", p, in)
		}
	}
	// Every list entry names a real field.
	for _, entry := range append(append(slices.Collect(mapKeys(enforced)), slices.Collect(mapKeys(untested))...), append(delegated, noBehaviour...)...) {
		if strings.HasPrefix(entry, "*.") {
			continue
		}
		if !coversSome(entry, paths) && !inSchema(entry) {
			t.Errorf("list entry %s names no field", entry)
		}
	}
	for k, rs := range refusals {
		for _, r := range rs {
			if covers := coversSome(strings.TrimSuffix(k+"."+r.path, "[]"), paths); covers == r.unmodelled {
				t.Errorf("refusal %s.%s: names a modelled field %v, marked unmodelled %v", k, r.path, covers, r.unmodelled)
			}
		}
	}
}

func coversSome(entry string, paths map[string]reflect.Type) bool {
	for p := range paths {
		if p == entry || strings.HasPrefix(p, entry+".") || strings.HasPrefix(p, entry+"[]") {
			return true
		}
	}
	return false
}

// The enforced table cannot name a test that does not exist.
func TestEnforcedTestsExist(t *testing.T) {
	root := filepath.Join("..", "..")
	re := regexp.MustCompile(`(?m)^func (Test\w+)\(`)
	have := map[string]bool{}
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "bin") {
			return filepath.SkipDir
		}
		if strings.HasSuffix(p, "_test.go") {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			for _, m := range re.FindAllSubmatch(b, -1) {
				have[string(m[1])] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for field, test := range enforced {
		if !have[test] {
			t.Errorf("%s: enforced by %s, but no test has that name", field, test)
		}
	}
}

// sampleJSON builds an object of kind with path set to a value of its type
// that is none of ok.
func sampleJSON(kind, path string, leaf reflect.Type, ok []string) string {
	var v any
	if leaf == nil { // a member our types do not model
		leaf = reflect.TypeFor[string]()
	}
	switch lt := deref(leaf); {
	case lt == reflect.TypeFor[Duration]():
		v = "7s"
	case lt == reflect.TypeFor[Port]() || lt == reflect.TypeFor[ASNumber]() || lt == reflect.TypeFor[Protocol]():
		v = 7
	case lt.Kind() == reflect.Bool:
		v = !slices.Contains(ok, "true")
	case lt.Kind() == reflect.String:
		v = "zz-7"
	case lt.Kind() >= reflect.Int && lt.Kind() <= reflect.Float64:
		v = 7
	case lt.Kind() == reflect.Slice && deref(lt.Elem()).Kind() == reflect.String:
		v = []any{"zz-7"}
	case lt.Kind() == reflect.Slice:
		v = []any{map[string]any{"name": "zz-7"}}
	default:
		v = map[string]any{"name": "zz-7"}
	}
	return string(objectJSON(kind, path, v))
}

// objectJSON is an object of kind named x (in namespace ns when the kind
// is namespaced) with path (JSON names, [] for an array) set to v.
func objectJSON(kind, path string, v any) []byte {
	segs := strings.Split(path, ".")
	for i := len(segs) - 1; i >= 0; i-- {
		name, each := strings.CutSuffix(segs[i], "[]")
		if each {
			v = []any{v}
		}
		v = map[string]any{name: v}
	}
	m := v.(map[string]any)
	m["kind"], m["apiVersion"] = kind, APIVersion
	meta := map[string]any{"name": "x"}
	if k, _ := LookupKind(kind); k.Namespaced {
		meta["namespace"] = "ns"
	}
	m["metadata"] = meta
	b, _ := json.Marshal(m)
	return b
}

// Every refused field, set to a value other than what the agent does, is
// refused at write with an error naming it; reported ones are found by
// Unsupported but not refused.
func TestUnsupportedRefusedAtWrite(t *testing.T) {
	paths := allPaths()
	for kind, rs := range refusals {
		for _, r := range rs {
			docKind, docPath, want := kind, r.path, strings.ReplaceAll(r.path, "[]", "[0]")
			if kind == ruleKind {
				docKind, docPath, want = "NetworkPolicy", "spec.ingress[]."+r.path, "spec.ingress[0]."+r.path
			}
			leaf := paths[kind+"."+r.path]
			if leaf == nil { // an object or list refused whole: any member will do
				for p, lt := range paths {
					if strings.HasPrefix(p, kind+"."+r.path) {
						leaf, docPath = lt, docPath+strings.TrimPrefix(p, kind+"."+r.path)
						break
					}
				}
			}
			doc := sampleJSON(docKind, docPath, leaf, r.ok)
			obj, err := Decode([]byte(doc))
			if err != nil {
				t.Errorf("%s.%s: Decode(%s): %v", kind, r.path, doc, err)
				continue
			}
			found := false
			for _, p := range Unsupported(obj) {
				found = found || p.Field == want
			}
			if !found {
				t.Errorf("%s.%s: Unsupported(%s) = %v, want it named", kind, r.path, doc, Unsupported(obj))
			}
			err = obj.Validate()
			refused := err != nil && strings.Contains(err.Error(), want+": ") && strings.Contains(err.Error(), "is not supported by this agent")
			if refused == r.report {
				t.Errorf("%s.%s (report=%v): Validate(%s) = %v", kind, r.path, r.report, doc, err)
			}
		}
	}
}

func TestUnsupportedNamesConcretePaths(t *testing.T) {
	doc := `{"kind":"GlobalNetworkPolicy","metadata":{"name":"p"},"spec":{"serviceAccountSelector":"a == 'b'","applyOnForward":true,
		"ingress":[{"action":"Allow"},{"action":"Allow","source":{"serviceAccounts":{"names":["x"],"selector":"role == 'db'"}},"http":{"methods":["GET"]}},
			{"action":"Allow","source":{"services":{"name":"web","namespace":"prod"}},"http":{"paths":[{"exact":"/a"}]}}],
		"egress":[{"action":"Deny","destination":{"services":{"name":"kube-dns","namespace":"kube-system"}}}]}}`
	r, err := Decode([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range Unsupported(r) {
		got = append(got, p.String())
	}
	want := []string{
		`spec.ingress[1].http={"methods":["GET"]}`,
		`spec.ingress[2].http={"paths":[{"exact":"/a"}]}`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("Unsupported = %q\nwant %q", got, want)
	}
	err = r.Validate()
	for _, f := range []string{"spec.ingress[1].http", "spec.ingress[2].http"} {
		if err == nil || !strings.Contains(err.Error(), f+": ") {
			t.Errorf("Validate does not refuse %s: %v", f, err)
		}
	}
	// What the agent does anyway passes: Never, false, the defaults.
	for _, ok := range []string{
		`{"kind":"IPPool","metadata":{"name":"p"},"spec":{"cidr":"10.0.0.0/16","vxlanMode":"Never","ipipMode":"Never"}}`,
		`{"kind":"GlobalNetworkPolicy","metadata":{"name":"p"},"spec":{"applyOnForward":false,"selector":"all()"}}`,
		`{"kind":"FelixConfiguration","metadata":{"name":"default"},"spec":{"logSeverityScreen":"Info","healthPort":9099,"defaultEndpointToHostAction":"Accept"}}`,
		`{"kind":"StagedGlobalNetworkPolicy","metadata":{"name":"p"},"spec":{"stagedAction":"Set","doNotTrack":true,"applyOnForward":true,"serviceAccountSelector":"a == 'b'"}}`,
	} {
		r, err := Decode([]byte(ok))
		if err != nil {
			t.Fatal(err)
		}
		r.Default()
		if err := r.Validate(); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
}

func mapKeys[M ~map[K]V, K comparable, V any](m M) func(func(K) bool) {
	return func(yield func(K) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}
