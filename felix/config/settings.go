// Package config is the agent's configuration: its flags and their
// variables, the datastore choice, the FELIX_* environment and the
// FelixConfiguration objects merged with Calico's precedence (node.<name>,
// selector-scoped, default), and what follows the effective settings live:
// the log outputs, the health and metrics listeners, the kernel refreshes.
package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/calico-aio/calico-aio/felix/calc"
	"github.com/calico-aio/calico-aio/store/api"
)

// The effective Felix configuration (docs/CONFIGURATION.md). Each setting
// is read, as in Calico, from the first of these that has a value:
//
//  1. the environment, FELIX_<FIELD> (the name case-insensitive);
//  2. (Calico's config file: this agent has none);
//  3. FelixConfiguration node.<nodename>;
//  4. FelixConfiguration default;
//  5. Calico's default.
//
// A bad environment value is a start-up error naming the variable. A bad
// datastore value is refused at write by store/api validation; one another
// tool wrote is logged and the next source is used instead.

// spec is the shape every source is read into.
type spec = api.FelixConfigurationSpec

type durationPtr = *api.Duration

// setting is one supported field: its JSON name, environment variable,
// whether a change applies without restarting the dataplane loop, and
// how its value is read from the environment, checked, copied and
// compared.
type setting struct {
	name string // JSON name in FelixConfiguration.spec
	env  string // FELIX_<NAME>
	def  string // Calico's default, as the JSON value reads ("" when unset is the default)
	live bool
	// parse reads the environment's text into the field of s.
	parse func(s *spec, text string) error
	// check validates the field of s as the datastore holds it (nil: ok).
	check func(s *spec) error
	// take copies the field from src to dst when src sets it.
	take func(dst, src *spec) bool
	// same reports whether a and b hold the same value of the field.
	same func(a, b *spec) bool
}

// field builds a setting for a field of type T (a string, or a pointer:
// the zero value means unset). parse turns environment text into the
// value; valid checks a set value as stored (nil accepts any).
func field[T any](name, def string, live bool, get func(*spec) *T, parse func(string) (T, error), valid func(T) error) setting {
	set := func(v T) bool { return !reflect.ValueOf(&v).Elem().IsZero() }
	s := setting{name: name, env: "FELIX_" + strings.ToUpper(name), def: def, live: live}
	s.parse = func(sp *spec, text string) error {
		v, err := parse(strings.TrimSpace(text))
		if err != nil {
			return err
		}
		*get(sp) = v
		return nil
	}
	s.check = func(sp *spec) error {
		if v := *get(sp); set(v) && valid != nil {
			return valid(v)
		}
		return nil
	}
	s.take = func(dst, src *spec) bool {
		if v := *get(src); set(v) {
			*get(dst) = v
			return true
		}
		return false
	}
	s.same = func(a, b *spec) bool { return reflect.DeepEqual(*get(a), *get(b)) }
	return s
}

// withEnv renames a setting's variable where Calico's differs from
// FELIX_<JSON name>.
func withEnv(s setting, env string) setting { s.env = env; return s }

// settings is every field the loader reads. A FelixConfiguration field
// not listed here is either refused at write (store/api/unsupported.go)
// or read elsewhere (docs/CONFIGURATION.md says which).
var settings = []setting{
	field("logSeverityScreen", "Info", true, func(s *spec) *string { return &s.LogSeverityScreen }, OneOf(LogLevelNames...), ValidOneOf(LogLevelNames...)),
	field("logSeverityFile", "Info", true, func(s *spec) *string { return &s.LogSeverityFile }, OneOf(LogLevelNames...), ValidOneOf(LogLevelNames...)),
	field("logFilePath", "none", true, func(s *spec) *string { return &s.LogFilePath }, ParseLogPath, ValidLogPath),
	field("ipForwarding", "Enabled", true, func(s *spec) *string { return &s.IPForwarding }, OneOf("Enabled", "Disabled"), ValidOneOf("Enabled", "Disabled")),
	field("defaultEndpointToHostAction", "Drop", true, func(s *spec) *string { return &s.DefaultEndpointToHostAction },
		OneOf("Drop", "Accept", "Return"), ValidOneOf("Drop", "Accept", "Return")),
	field("failsafeInboundHostPorts", "tcp:22,udp:68,tcp:179,tcp:2379,tcp:2380,tcp:5473,tcp:6443,tcp:6666,tcp:6667", true, func(s *spec) **[]api.ProtoPort { return &s.FailsafeInboundHostPorts }, ParseProtoPorts, ValidProtoPorts),
	field("failsafeOutboundHostPorts", "udp:53,udp:67,tcp:179,tcp:2379,tcp:2380,tcp:5473,tcp:6443,tcp:6666,tcp:6667", true, func(s *spec) **[]api.ProtoPort { return &s.FailsafeOutboundHostPorts }, ParseProtoPorts, ValidProtoPorts),
	field("mtuIfacePattern", DefaultMTUIfacePattern, true, func(s *spec) *string { return &s.MTUIfacePattern }, ParseRegexp, ValidRegexp),
	field("vxlanEnabled", "", true, func(s *spec) **bool { return &s.VXLANEnabled }, ParseBool, nil),
	field("vxlanPort", "4789", true, func(s *spec) **int { return &s.VXLANPort }, ParseIntIn(1, 65535), ValidIntIn(1, 65535)),
	field("vxlanVNI", "4096", true, func(s *spec) **int { return &s.VXLANVNI }, ParseIntIn(1, 1<<24-1), ValidIntIn(1, 1<<24-1)),
	field("vxlanMTU", "0", true, func(s *spec) **int { return &s.VXLANMTU }, ParseMTU, ValidMTU),
	field("vxlanMTUV6", "0", true, func(s *spec) **int { return &s.VXLANMTUV6 }, ParseMTU, ValidMTU),
	withEnv(field("ipipEnabled", "", true, func(s *spec) **bool { return &s.IPIPEnabled }, ParseBool, nil), "FELIX_IPINIPENABLED"),
	withEnv(field("ipipMTU", "0", true, func(s *spec) **int { return &s.IPIPMTU }, ParseMTU, ValidMTU), "FELIX_IPINIPMTU"),
	field("allowVXLANPacketsFromWorkloads", "false", true, func(s *spec) **bool { return &s.AllowVXLANPacketsFromWorkloads }, ParseBool, nil),
	field("allowIPIPPacketsFromWorkloads", "false", true, func(s *spec) **bool { return &s.AllowIPIPPacketsFromWorkloads }, ParseBool, nil),
	field("chainInsertMode", "Insert", true, func(s *spec) *string { return &s.ChainInsertMode }, OneOf("Insert", "Append"), ValidOneOf("Insert", "Append")),
	field("iptablesFilterAllowAction", "Accept", true, func(s *spec) *string { return &s.IptablesFilterAllowAction }, OneOf("Accept", "Return"), ValidOneOf("Accept", "Return")),
	field("iptablesMangleAllowAction", "Accept", true, func(s *spec) *string { return &s.IptablesMangleAllowAction }, OneOf("Accept", "Return"), ValidOneOf("Accept", "Return")),
	field("iptablesMarkMask", "0xffff0000", true, func(s *spec) **uint32 { return &s.IptablesMarkMask }, ParseMarkMask, ValidMarkMask),
	field("natOutgoingAddress", "", true, func(s *spec) *string { return &s.NATOutgoingAddress }, ParseIPv4, ValidIPv4),
	field("natPortRange", "", true, func(s *spec) **api.Port { return &s.NATPortRange }, ParsePortRange, ValidPortRange),
	// nftablesMode (felix/metrics/nftables.go): Enabled is refused, this agent has no
	// nftables dataplane.
	field("nftablesMode", "Auto", true, func(s *spec) *string { return &s.NFTablesMode }, OneOf("Disabled", "Auto"), ValidOneOf("Disabled", "Auto")),
	field("iptablesBackend", "Auto", true, func(s *spec) *string { return &s.IptablesBackend }, OneOf("Legacy", "NFT", "Auto"), ValidOneOf("Legacy", "NFT", "Auto")),
	field("removeExternalRoutes", "true", true, func(s *spec) **bool { return &s.RemoveExternalRoutes }, ParseBool, nil),
	field("iptablesRefreshInterval", "3m0s", true, func(s *spec) **api.Duration { return &s.IptablesRefreshInterval }, ParseSeconds, ValidNonNegative),
	field("routeRefreshInterval", "1m30s", true, func(s *spec) **api.Duration { return &s.RouteRefreshInterval }, ParseSeconds, ValidNonNegative),
	field("ipsetsRefreshInterval", "1m30s", true, func(s *spec) **api.Duration { return &s.IpsetsRefreshInterval }, ParseSeconds, ValidNonNegative),
	field("interfaceRefreshInterval", "1m30s", true, func(s *spec) **api.Duration { return &s.InterfaceRefreshInterval }, ParseSeconds, ValidNonNegative),
	field("healthEnabled", "true", true, func(s *spec) **bool { return &s.HealthEnabled }, ParseBool, nil),
	field("healthHost", "localhost", true, func(s *spec) **string { return &s.HealthHost }, ParseHost, ValidHost),
	field("healthTimeoutOverrides", "", true, func(s *spec) **[]api.HealthTimeoutOverride { return &s.HealthTimeoutOverrides }, ParseHealthOverrides, ValidHealthOverrides),
	field("healthPort", "9099", true, func(s *spec) **int { return &s.HealthPort }, ParseIntIn(1, 65535), ValidIntIn(1, 65535)),
	field("prometheusMetricsEnabled", "true", true, func(s *spec) **bool { return &s.PrometheusMetricsEnabled }, ParseBool, nil),
	field("prometheusMetricsHost", "", true, func(s *spec) *string { return &s.PrometheusMetricsHost }, ParseHostString, ValidHostString),
	field("prometheusMetricsPort", "9091", true, func(s *spec) **int { return &s.PrometheusMetricsPort }, ParseIntIn(1, 65535), ValidIntIn(1, 65535)),
	// Status reports (felix/status/report.go).
	field("endpointReportingEnabled", "false", true, func(s *spec) **bool { return &s.EndpointReportingEnabled }, ParseBool, nil),
	withEnv(field("endpointReportingDelay", "1s", true, func(s *spec) **api.Duration { return &s.EndpointReportingDelay }, ParseSeconds, ValidNonNegative), "FELIX_ENDPOINTREPORTINGDELAYSECS"),
	withEnv(field("reportingInterval", "30s", true, func(s *spec) **api.Duration { return &s.ReportingInterval }, ParseSeconds, ValidNonNegative), "FELIX_REPORTINGINTERVALSECS"),
	field("maxIpsetSize", "1048576", true, func(s *spec) **int { return &s.MaxIpsetSize }, ParseIntIn(1, 1<<31-1), ValidIntIn(1, 1<<31-1)),
	withEnv(field("iptablesLockTimeout", "0s", true, func(s *spec) **api.Duration { return &s.IptablesLockTimeout }, ParseSeconds, ValidNonNegative), "FELIX_IPTABLESLOCKTIMEOUTSECS"),
	withEnv(field("iptablesLockProbeInterval", "50ms", true, func(s *spec) **api.Duration { return &s.IptablesLockProbeInterval }, ParseMillis, ValidNonNegative), "FELIX_IPTABLESLOCKPROBEINTERVALMILLIS"),
	field("ipv6Support", "true", true, func(s *spec) **bool { return &s.IPv6Support }, ParseBool, nil),
	field("logSeveritySys", "Info", true, func(s *spec) *string { return &s.LogSeveritySys }, OneOf(append(LogLevelNames, "None")...), ValidOneOf(LogLevelNames...)),
	withEnv(field("reportingTTL", "1m30s", true, func(s *spec) **api.Duration { return &s.ReportingTTL }, ParseSeconds, ValidNonNegative), "FELIX_REPORTINGTTLSECS"),
	// Policy rendering (felix/rules).
	field("iptablesFilterDenyAction", "Drop", true, func(s *spec) *string { return &s.IptablesFilterDenyAction }, OneOf("Drop", "Reject"), ValidOneOf("Drop", "Reject")),
	field("disableConntrackInvalidCheck", "false", true, func(s *spec) **bool { return &s.DisableConntrackInvalidCheck }, ParseBool, nil),
	field("natOutgoingExclusions", "IPPoolsOnly", true, func(s *spec) *string { return &s.NATOutgoingExclusions }, OneOf("IPPoolsOnly", "IPPoolsAndHostIPs"), ValidOneOf("IPPoolsOnly", "IPPoolsAndHostIPs")),
	field("iptablesNATOutgoingInterfaceFilter", "", true, func(s *spec) *string { return &s.IptablesNATOutgoingInterfaceFilter }, ParseIfaceFilter, ValidIfaceFilter),
	field("workloadSourceSpoofing", "Disabled", true, func(s *spec) *string { return &s.WorkloadSourceSpoofing }, OneOf("Disabled", "Any"), ValidOneOf("Disabled", "Any")),
	field("logPrefix", "calico-packet", true, func(s *spec) *string { return &s.LogPrefix }, ParseLogPrefix, ValidLogPrefix),
	field("logActionRateLimit", "", true, func(s *spec) *string { return &s.LogActionRateLimit }, ParseLogRateLimit, ValidLogRateLimit),
	field("logActionRateLimitBurst", "5", true, func(s *spec) **int { return &s.LogActionRateLimitBurst }, ParseIntIn(0, 9999), ValidIntIn(0, 9999)),
	// Calico renders service loop prevention only for the service CIDRs
	// BGPConfiguration advertises, which this agent refuses: accepted,
	// validated, nothing to render (docs/CONFIGURATION.md).
	field("serviceLoopPrevention", "Drop", true, func(s *spec) *string { return &s.ServiceLoopPrevention }, OneOf("Drop", "Reject", "Disabled"), ValidOneOf("Drop", "Reject", "Disabled")),
	// Routes to local workloads and workload interfaces (felix/dataplane,
	// felix/routes/devroutes.go, felix/config/routes.go).
	field("deviceRouteSourceAddress", "", true, func(s *spec) *string { return &s.DeviceRouteSourceAddress }, ParseIPv4, ValidIPv4),
	field("deviceRouteSourceAddressIPv6", "", true, func(s *spec) *string { return &s.DeviceRouteSourceAddressIPv6 }, ParseIPv6, ValidIPv6),
	field("deviceRouteProtocol", "80", true, func(s *spec) **int { return &s.DeviceRouteProtocol }, ParseIntIn(0, 255), ValidIntIn(0, 255)),
	field("interfacePrefix", "cali", true, func(s *spec) *string { return &s.InterfacePrefix }, ParseIfaceList, ValidIfaceList),
	field("interfaceExclude", "kube-ipvs0", true, func(s *spec) *string { return &s.InterfaceExclude }, ParseIfaceExclude, ValidIfaceExclude),
	field("routeTableRange", "", true, func(s *spec) **api.RouteTableRange { return &s.RouteTableRange }, ParseRouteTableRange, ValidRouteTableRange),
	field("routeTableRanges", "", true, func(s *spec) **[]api.RouteTableRange { return &s.RouteTableRanges }, ParseRouteTableRanges, ValidRouteTableRanges),
	field("ipv4NormalRoutePriority", "1024", true, func(s *spec) **int { return &s.IPv4NormalRoutePriority }, ParseIntIn(1, api.MaxRoutePriority), ValidIntIn(1, api.MaxRoutePriority)),
	field("ipv6NormalRoutePriority", "1024", true, func(s *spec) **int { return &s.IPv6NormalRoutePriority }, ParseIntIn(1, api.MaxRoutePriority), ValidIntIn(1, api.MaxRoutePriority)),
	field("ipv4ElevatedRoutePriority", "512", true, func(s *spec) **int { return &s.IPv4ElevatedRoutePriority }, ParseIntIn(1, api.MaxRoutePriority), ValidIntIn(1, api.MaxRoutePriority)),
	field("ipv6ElevatedRoutePriority", "512", true, func(s *spec) **int { return &s.IPv6ElevatedRoutePriority }, ParseIntIn(1, api.MaxRoutePriority), ValidIntIn(1, api.MaxRoutePriority)),
	field("routeSyncDisabled", "false", true, func(s *spec) **bool { return &s.RouteSyncDisabled }, ParseBool, nil),
	field("routeSource", "CalicoIPAM", true, func(s *spec) *string { return &s.RouteSource }, OneOf("CalicoIPAM", "WorkloadIPs"), ValidOneOf("CalicoIPAM", "WorkloadIPs")),
	// Routes to other nodes' blocks in pools without VXLAN (felix/calc/overlay_cluster.go).
	field("programClusterRoutes", "Disabled", true, func(s *spec) *string { return &s.ProgramClusterRoutes }, OneOf("Enabled", "Disabled"), ValidOneOf("Enabled", "Disabled")),
	// The dataplane's netlink socket (felix/dataplane/nlhandle.go, felix/config/netlink.go).
	withEnv(field("netlinkTimeout", "10s", true, func(s *spec) **api.Duration { return &s.NetlinkTimeout }, ParseSeconds, ValidNonNegative), "FELIX_NETLINKTIMEOUTSECS"),
	// Floating IPs (felix/calc/desired.go).
	field("floatingIPs", "Disabled", true, func(s *spec) **string { return &s.FloatingIPs }, OptOneOf("Enabled", "Disabled"), ValidOptOneOf("Enabled", "Disabled")),
	// Metrics endpoint TLS (felix/config/servers.go).
	field("prometheusMetricsCertFile", "", true, func(s *spec) *string { return &s.PrometheusMetricsCertFile }, parsePath, nil),
	field("prometheusMetricsKeyFile", "", true, func(s *spec) *string { return &s.PrometheusMetricsKeyFile }, parsePath, nil),
	field("prometheusMetricsCAFile", "", true, func(s *spec) *string { return &s.PrometheusMetricsCAFile }, parsePath, nil),
	// The Go runtime's and the process's series on /metrics (felix/metrics).
	field("prometheusGoMetricsEnabled", "true", true, func(s *spec) **bool { return &s.PrometheusGoMetricsEnabled }, ParseBool, nil),
	field("prometheusProcessMetricsEnabled", "true", true, func(s *spec) **bool { return &s.PrometheusProcessMetricsEnabled }, ParseBool, nil),
	// kube-proxy IPVS mode's node ports (felix/rules/ipvs.go, felix/config/ipvs.go).
	field("kubeNodePortRanges", `["30000:32767"]`, true, func(s *spec) **[]api.Port { return &s.KubeNodePortRanges }, ParseNodePortRanges, ValidNodePortRanges),
	// Endpoint status files for the CNI plugin's policy wait (felix/status/files.go).
	field("endpointStatusPathPrefix", "/var/run/calico", true, func(s *spec) **string { return &s.EndpointStatusPathPrefix }, parseStatusPrefix, validStatusPrefix),
}

// envOnly are FELIX_* variables the agent reads as flags (flags.go) or
// as its datastore's (datastore.go), not FelixConfiguration fields; the
// loader leaves them alone.
var envOnly = append([]string{"FELIX_MTU", "FELIX_HEALTHADDR", "FELIX_METRICSADDR", "FELIX_RESYNC_INTERVAL"}, felixDatastoreEnv...)

// ParseFelixEnv reads every FELIX_* variable of environ (KEY=value
// lines) that names a supported setting, case-insensitively. A bad value
// is an error naming the variable; a variable naming a FelixConfiguration
// field the agent does not honour is logged and otherwise ignored.
func ParseFelixEnv(environ []string) (spec, error) {
	var out spec
	var errs []error
	for _, kv := range environ {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(strings.ToUpper(k), "FELIX_") || slices.Contains(envOnly, strings.ToUpper(k)) {
			continue
		}
		i := slices.IndexFunc(settings, func(s setting) bool { return strings.EqualFold(s.env, k) })
		if i < 0 {
			if strings.TrimSpace(v) != "" {
				slog.Warn("environment variable not honoured by this agent; ignored (docs/CONFIGURATION.md)", "var", k, "value", v)
			}
			continue
		}
		if strings.TrimSpace(v) == "" {
			continue // empty is unset, as in Calico
		}
		if err := settings[i].parse(&out, v); err != nil {
			errs = append(errs, fmt.Errorf("%s=%q: %w", k, v, err))
		}
	}
	return out, errors.Join(errs...)
}

// Effective merges the sources: env over the objects in precedence order
// (node.<name>, the selector-scoped one, default; nil ones skipped). A
// datastore value that fails its check is logged (by the caller, from
// the returned problems) and skipped.
func Effective(env spec, objs ...*api.FelixConfiguration) (spec, []error) {
	var out spec
	var problems []error
	for _, st := range settings {
		if st.take(&out, &env) {
			continue
		}
		for _, src := range objs {
			if src == nil {
				continue
			}
			if err := st.check(&src.Spec); err != nil {
				problems = append(problems, fmt.Errorf("FelixConfiguration %s spec.%s: %w; ignored", src.Metadata.Name, st.name, err))
				continue
			}
			if st.take(&out, &src.Spec) {
				break
			}
		}
	}
	return out, problems
}

// settingValue is a setting's value in s as JSON text (strings
// unquoted), or Calico's default when s leaves it unset.
func settingValue(s *spec, st setting) string {
	var probe spec
	if !st.take(&probe, s) {
		return st.def
	}
	b, _ := json.Marshal(probe)
	var m map[string]json.RawMessage
	_ = json.Unmarshal(b, &m)
	v := string(m[st.name])
	if u, err := strconv.Unquote(v); err == nil {
		return u
	}
	return v
}

// SettingValue is the value in s of the setting named name as JSON text
// (strings unquoted), or Calico's default when s leaves it unset; "" when
// no setting has that name.
func SettingValue(s *spec, name string) string {
	if i := slices.IndexFunc(settings, func(st setting) bool { return st.name == name }); i >= 0 {
		return settingValue(s, settings[i])
	}
	return ""
}

// changedSettings names the settings whose values differ between a and b.
func changedSettings(a, b *spec) []string {
	var out []string
	for _, st := range settings {
		if !st.same(a, b) {
			out = append(out, st.name)
		}
	}
	return out
}

// Loader keeps the effective configuration as the two
// FelixConfiguration objects that concern this node change.
type Loader struct {
	node           string
	env            spec
	host, global   *api.FelixConfiguration
	scoped         map[string]*api.FelixConfiguration // by name (settings_scoped.go in this package)
	labels         map[string]string                  // this node's
	cur            spec
	loggedProblems map[string]bool // a bad stored value is logged once
}

// NewLoader starts with only env, the FELIX_* layer, for the node named node.
func NewLoader(node string, env spec) *Loader {
	l := &Loader{node: node, env: env, loggedProblems: map[string]bool{}, scoped: map[string]*api.FelixConfiguration{}}
	l.cur, _ = Effective(env, nil, nil)
	return l
}

// Current is the effective configuration.
func (l *Loader) Current() spec { return l.cur }

// Apply records a FelixConfiguration update, or one of this node's Node
// (its labels select the selector-scoped configuration), and recomputes.
// It returns whether u concerned this node's configuration and which
// settings changed.
func (l *Loader) Apply(u calc.Update) (mine bool, changed []string) {
	name := u.Key[strings.LastIndexByte(u.Key, '/')+1:]
	switch {
	case u.Kind == "nodes" && name == l.node:
		l.labels = nil
		if !u.Deleted && u.Resource != nil {
			l.labels = u.Resource.GetObjectMeta().Labels
		}
	case u.Kind != "felixconfigurations":
		return false, nil
	default:
		var f *api.FelixConfiguration
		if !u.Deleted {
			f, _ = u.Resource.(*api.FelixConfiguration)
		}
		switch {
		case name == "default":
			l.global = f
		case name == "node."+l.node:
			l.host = f
		case strings.HasPrefix(name, "node."):
			return false, nil
		case f == nil:
			delete(l.scoped, name)
		default:
			l.scoped[name] = f
		}
	}
	next, problems := Effective(l.env, l.host, l.scopedNow(), l.global)
	for _, p := range problems {
		if !l.loggedProblems[p.Error()] {
			l.loggedProblems[p.Error()] = true
			slog.Warn("bad FelixConfiguration value", "err", p)
		}
	}
	changed = changedSettings(&l.cur, &next)
	l.cur = next
	return true, changed
}

// EffectiveUpdate is the effective configuration as one FelixConfiguration
// "default" update: the calculation and the overlay read their fields
// from it, so every source reaches them with the same precedence.
func (l *Loader) EffectiveUpdate() calc.Update {
	k, _ := api.LookupKind("FelixConfiguration")
	f := &api.FelixConfiguration{TypeMeta: api.TypeMeta{Kind: "FelixConfiguration", APIVersion: api.APIVersion},
		Metadata: api.ObjectMeta{Name: "default"}, Spec: l.cur}
	return calc.Update{Kind: k.Plural, Key: calc.ResourceUpdateKey(k, "", "default"), Resource: f}
}

// BoolOr is *b, or def when the setting is unset.
func BoolOr(b *bool, def bool) bool {
	if b == nil {
		return def
	}
	return *b
}
