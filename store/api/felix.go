package api

import (
	"math/bits"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
)

// FelixConfiguration holds dataplane agent settings: "default" for the
// cluster, or "node.<name>" for one node. Nil fields mean the agent's default.
type FelixConfiguration struct {
	TypeMeta
	Metadata ObjectMeta             `json:"metadata"`
	Spec     FelixConfigurationSpec `json:"spec"`
}

// FelixConfigurationSpec is a subset of projectcalico.org/v3
// FelixConfiguration.spec. Fields it does not model are kept by Decode
// and written back by Marshal, like every kind's (unmodelled.go).
type FelixConfigurationSpec struct {
	// NodeSelector makes an object named neither "default" nor
	// "node.<name>" apply to the nodes it selects (felix/config/scoped.go).
	NodeSelector string `json:"nodeSelector,omitempty"`

	LogSeverityScreen string `json:"logSeverityScreen,omitempty"`
	LogSeverityFile   string `json:"logSeverityFile,omitempty"`
	LogSeveritySys    string `json:"logSeveritySys,omitempty"`
	LogFilePath       string `json:"logFilePath,omitempty"`
	LogPrefix         string `json:"logPrefix,omitempty"`

	ReportingInterval         *Duration `json:"reportingInterval,omitempty"`
	ReportingTTL              *Duration `json:"reportingTTL,omitempty"`
	EndpointReportingEnabled  *bool     `json:"endpointReportingEnabled,omitempty"`
	EndpointReportingDelay    *Duration `json:"endpointReportingDelay,omitempty"`
	IptablesRefreshInterval   *Duration `json:"iptablesRefreshInterval,omitempty"`
	IptablesLockTimeout       *Duration `json:"iptablesLockTimeout,omitempty"`
	IptablesLockProbeInterval *Duration `json:"iptablesLockProbeInterval,omitempty"`
	RouteRefreshInterval      *Duration `json:"routeRefreshInterval,omitempty"`
	InterfaceRefreshInterval  *Duration `json:"interfaceRefreshInterval,omitempty"`
	IpsetsRefreshInterval     *Duration `json:"ipsetsRefreshInterval,omitempty"`
	MaxIpsetSize              *int      `json:"maxIpsetSize,omitempty"`
	NetlinkTimeout            *Duration `json:"netlinkTimeout,omitempty"`

	IPv6Support                 *bool        `json:"ipv6Support,omitempty"`
	IptablesBackend             string       `json:"iptablesBackend,omitempty"`
	NFTablesMode                string       `json:"nftablesMode,omitempty"`
	ChainInsertMode             string       `json:"chainInsertMode,omitempty"`
	DefaultEndpointToHostAction string       `json:"defaultEndpointToHostAction,omitempty"`
	IptablesFilterAllowAction   string       `json:"iptablesFilterAllowAction,omitempty"`
	IptablesMangleAllowAction   string       `json:"iptablesMangleAllowAction,omitempty"`
	IptablesFilterDenyAction    string       `json:"iptablesFilterDenyAction,omitempty"`
	IptablesMarkMask            *uint32      `json:"iptablesMarkMask,omitempty"`
	FailsafeInboundHostPorts    *[]ProtoPort `json:"failsafeInboundHostPorts,omitempty"`
	FailsafeOutboundHostPorts   *[]ProtoPort `json:"failsafeOutboundHostPorts,omitempty"`
	NATOutgoingAddress          string       `json:"natOutgoingAddress,omitempty"`
	NATPortRange                *Port        `json:"natPortRange,omitempty"`
	ServiceLoopPrevention       string       `json:"serviceLoopPrevention,omitempty"`
	IPForwarding                string       `json:"ipForwarding,omitempty"`

	InterfacePrefix      string           `json:"interfacePrefix,omitempty"`
	InterfaceExclude     string           `json:"interfaceExclude,omitempty"`
	MTUIfacePattern      string           `json:"mtuIfacePattern,omitempty"`
	RouteTableRange      *RouteTableRange `json:"routeTableRange,omitempty"`
	RouteSource          string           `json:"routeSource,omitempty"`
	RemoveExternalRoutes *bool            `json:"removeExternalRoutes,omitempty"`
	// ProgramClusterRoutes Enabled: the agent routes other nodes' blocks
	// in pools without VXLAN itself (felix/calc/overlay_cluster.go).
	ProgramClusterRoutes string `json:"programClusterRoutes,omitempty"`
	// RouteSyncDisabled: the agent leaves the routes Felix would program
	// alone (felix/dataplane/routes_sync.go).
	RouteSyncDisabled   *bool `json:"routeSyncDisabled,omitempty"`
	DeviceRouteProtocol *int  `json:"deviceRouteProtocol,omitempty"`
	// DeviceRouteSourceAddress(IPv6) are the src of the routes to local
	// workloads.
	DeviceRouteSourceAddress     string `json:"deviceRouteSourceAddress,omitempty"`
	DeviceRouteSourceAddressIPv6 string `json:"deviceRouteSourceAddressIPv6,omitempty"`
	// RouteTableRanges (Calico's RouteTableRanges, over the deprecated
	// RouteTableRange): the kernel route tables the agent may use. This
	// agent uses none but main (docs/CONFIGURATION.md).
	RouteTableRanges *[]RouteTableRange `json:"routeTableRanges,omitempty"`
	// The metric of the routes to local workloads (normal), and of a
	// live-migrating workload's (elevated: none here, LiveMigration is not
	// served). felix/routes/devroutes.go.
	IPv4NormalRoutePriority   *int `json:"ipv4NormalRoutePriority,omitempty"`
	IPv6NormalRoutePriority   *int `json:"ipv6NormalRoutePriority,omitempty"`
	IPv4ElevatedRoutePriority *int `json:"ipv4ElevatedRoutePriority,omitempty"`
	IPv6ElevatedRoutePriority *int `json:"ipv6ElevatedRoutePriority,omitempty"`

	HealthEnabled *bool   `json:"healthEnabled,omitempty"`
	HealthHost    *string `json:"healthHost,omitempty"`
	HealthPort    *int    `json:"healthPort,omitempty"`
	// HealthTimeoutOverrides are liveness timeouts by health reporter
	// (felix/health/overrides.go).
	HealthTimeoutOverrides   *[]HealthTimeoutOverride `json:"healthTimeoutOverrides,omitempty"`
	PrometheusMetricsEnabled *bool                    `json:"prometheusMetricsEnabled,omitempty"`
	PrometheusMetricsHost    string                   `json:"prometheusMetricsHost,omitempty"`
	PrometheusMetricsPort    *int                     `json:"prometheusMetricsPort,omitempty"`
	// TLS of the metrics endpoint (PEM files): all three or none.
	PrometheusMetricsCertFile string `json:"prometheusMetricsCertFile,omitempty"`
	PrometheusMetricsKeyFile  string `json:"prometheusMetricsKeyFile,omitempty"`
	PrometheusMetricsCAFile   string `json:"prometheusMetricsCAFile,omitempty"`
	// The Go runtime's and the process's collectors on /metrics (Calico's
	// default true for both).
	PrometheusGoMetricsEnabled      *bool `json:"prometheusGoMetricsEnabled,omitempty"`
	PrometheusProcessMetricsEnabled *bool `json:"prometheusProcessMetricsEnabled,omitempty"`

	IPIPEnabled            *bool   `json:"ipipEnabled,omitempty"`
	IPIPMTU                *int    `json:"ipipMTU,omitempty"`
	VXLANEnabled           *bool   `json:"vxlanEnabled,omitempty"`
	VXLANPort              *int    `json:"vxlanPort,omitempty"`
	VXLANVNI               *int    `json:"vxlanVNI,omitempty"`
	VXLANMTU               *int    `json:"vxlanMTU,omitempty"`
	VXLANMTUV6             *int    `json:"vxlanMTUV6,omitempty"`
	WireguardEnabled       *bool   `json:"wireguardEnabled,omitempty"`
	WireguardEnabledV6     *bool   `json:"wireguardEnabledV6,omitempty"`
	WireguardListeningPort *int    `json:"wireguardListeningPort,omitempty"`
	WireguardInterfaceName string  `json:"wireguardInterfaceName,omitempty"`
	WireguardMTU           *int    `json:"wireguardMTU,omitempty"`
	BPFEnabled             *bool   `json:"bpfEnabled,omitempty"`
	BPFLogLevel            *string `json:"bpfLogLevel,omitempty"`
	// Calico's eBPF dataplane's; accepted only at the values calicoctl
	// stores by default (Default), as the rest of the eBPF settings.
	BPFConnectTimeLoadBalancing    string  `json:"bpfConnectTimeLoadBalancing,omitempty"`
	BPFHostNetworkedNATWithoutCTLB string  `json:"bpfHostNetworkedNATWithoutCTLB,omitempty"`
	XDPEnabled                     *bool   `json:"xdpEnabled,omitempty"`
	FloatingIPs                    *string `json:"floatingIPs,omitempty"`

	// Workloads may not send VXLAN or IP-in-IP unless these say so.
	AllowVXLANPacketsFromWorkloads *bool `json:"allowVXLANPacketsFromWorkloads,omitempty"`
	AllowIPIPPacketsFromWorkloads  *bool `json:"allowIPIPPacketsFromWorkloads,omitempty"`

	// Policy rendering (felix/rules).
	DisableConntrackInvalidCheck       *bool  `json:"disableConntrackInvalidCheck,omitempty"`
	NATOutgoingExclusions              string `json:"natOutgoingExclusions,omitempty"`
	IptablesNATOutgoingInterfaceFilter string `json:"iptablesNATOutgoingInterfaceFilter,omitempty"`
	WorkloadSourceSpoofing             string `json:"workloadSourceSpoofing,omitempty"`
	// Log rules match at most logActionRateLimit ("N/unit"), with bursts
	// of logActionRateLimitBurst (5 when unset), when the limit is set.
	LogActionRateLimit      string `json:"logActionRateLimit,omitempty"`
	LogActionRateLimitBurst *int   `json:"logActionRateLimitBurst,omitempty"`

	// KubeNodePortRanges are Kubernetes' node port ranges ("30000:32767"
	// when unset), read only in kube-proxy IPVS mode (felix/rules/ipvs.go).
	KubeNodePortRanges *[]Port `json:"kubeNodePortRanges,omitempty"`

	// EndpointStatusPathPrefix is where the agent writes endpoint status
	// files (<prefix>/endpoint-status) for the CNI plugin's policy wait:
	// unset means the agent's run directory (Calico: /var/run/calico);
	// "" or "none" turns them off (felix/status/files.go).
	EndpointStatusPathPrefix *string `json:"endpointStatusPathPrefix,omitempty"`
}

// ProtoPort is a failsafe port: protocol (TCP, UDP, SCTP), port and an
// optional remote CIDR.
type ProtoPort struct {
	Protocol string `json:"protocol"`
	Port     uint16 `json:"port"`
	Net      string `json:"net,omitempty"`
}

// MaxRoutePriority is the highest route priority Calico takes.
const MaxRoutePriority = 2147483646

// HealthTimeoutOverride is one health reporter's liveness timeout (0: none).
type HealthTimeoutOverride struct {
	Name    string   `json:"name"`
	Timeout Duration `json:"timeout"`
}

// HealthReporterRE is a health reporter's name.
var HealthReporterRE = lazyRegexp(`^[a-zA-Z0-9_.-]+$`)

// RouteTableRange is the range of kernel routing tables the agent may use.
type RouteTableRange struct {
	Min int `json:"min"`
	Max int `json:"max"`
}

// IfaceFilterRE is Calico's interface filter (iptables -o syntax, "+" a
// wildcard): iptablesNATOutgoingInterfaceFilter.
var IfaceFilterRE = lazyRegexp(`^[a-zA-Z0-9:._+-]{1,15}$`)

// LogRateLimitRE is Calico's logActionRateLimit: 1-9999 per second,
// minute, hour or day.
var LogRateLimitRE = lazyRegexp(`^[1-9]\d{0,3}/(?:second|minute|hour|day)$`)

// logPrefixRE is Calico's logPrefix restriction: letters, digits, ":",
// "%", "/", "_", "-" and space.
var logPrefixRE = lazyRegexp(`^[a-zA-Z0-9:%/_ -]*$`)

// MaxLogPrefix is the longest logPrefix: the rule logs "<prefix>: " and
// iptables takes at most 29 characters.
const MaxLogPrefix = 27

// LogPrefixProblem says what is wrong with a logPrefix, "" if nothing.
// Calico's "%" specifiers (%t tier, %k kind, %n name, %p namespaced name)
// are refused: this agent renders the prefix as given.
func LogPrefixProblem(p string) string {
	switch {
	case !logPrefixRE().MatchString(p):
		return "may hold only letters, digits, space and : % / _ -"
	case strings.Contains(p, "%"):
		return "specifiers (%t, %k, %n, %p) are not supported by this agent"
	case len(p) > MaxLogPrefix:
		return "must be at most " + strconv.Itoa(MaxLogPrefix) + " characters (iptables logs at most 29 with the \": \" Calico adds)"
	}
	return ""
}

var logLevels = []string{"Trace", "Debug", "Info", "Warning", "Error", "Fatal"}

func init() {
	register(KindInfo{
		Kind: "FelixConfiguration", Plural: "felixconfigurations",
		Aliases: []string{"felixconfiguration", "felixconfig", "felixconfigs"},
		New:     func() Resource { return &FelixConfiguration{} },
	})
}

func (c *FelixConfiguration) GetObjectMeta() *ObjectMeta { return &c.Metadata }

// Default does nothing: unset fields mean the agent's defaults.
// Default fills in what Calico v3.32.1's calicoctl stores in every
// FelixConfiguration it writes (recorded in Kubernetes datastore mode): the
// eBPF connect-time load balancing and NAT defaults, an empty eBPF log level
// and floating IPs Disabled.
func (c *FelixConfiguration) Default() {
	s := &c.Spec
	if s.BPFConnectTimeLoadBalancing == "" {
		s.BPFConnectTimeLoadBalancing = "TCP"
	}
	if s.BPFHostNetworkedNATWithoutCTLB == "" {
		s.BPFHostNetworkedNATWithoutCTLB = "Enabled"
	}
	if s.BPFLogLevel == nil {
		s.BPFLogLevel = new(string)
	}
	if s.FloatingIPs == nil {
		disabled := "Disabled"
		s.FloatingIPs = &disabled
	}
}

// Validate checks enumerations, ports, addresses and ranges of the
// modelled fields.
func (c *FelixConfiguration) Validate() error {
	var f fieldErrs
	f.unsupported(c)
	f.meta(&c.Metadata, false, subdomainProblem)
	s := &c.Spec
	if s.NodeSelector != "" {
		if n := c.Metadata.Name; n == "default" || strings.HasPrefix(n, "node.") {
			f.add("spec.nodeSelector", s.NodeSelector, "is valid only on a FelixConfiguration named neither default nor node.<nodename>")
		}
		if len(s.NodeSelector) > 1024 {
			f.add("spec.nodeSelector", s.NodeSelector[:32]+"...", "must be at most 1024 characters")
		}
		f.selector("spec.nodeSelector", s.NodeSelector)
	}
	f.oneOf("spec.logSeverityScreen", s.LogSeverityScreen, logLevels...)
	f.oneOf("spec.logSeverityFile", s.LogSeverityFile, logLevels...)
	f.oneOf("spec.logSeveritySys", s.LogSeveritySys, logLevels...)
	f.oneOf("spec.iptablesBackend", s.IptablesBackend, "Legacy", "NFT", "Auto")
	f.oneOf("spec.nftablesMode", s.NFTablesMode, "Enabled", "Disabled", "Auto")
	f.oneOf("spec.chainInsertMode", s.ChainInsertMode, "Insert", "Append")
	f.oneOf("spec.defaultEndpointToHostAction", s.DefaultEndpointToHostAction, "Drop", "Accept", "Return")
	f.oneOf("spec.iptablesFilterAllowAction", s.IptablesFilterAllowAction, "Accept", "Return")
	f.oneOf("spec.iptablesMangleAllowAction", s.IptablesMangleAllowAction, "Accept", "Return")
	f.oneOf("spec.iptablesFilterDenyAction", s.IptablesFilterDenyAction, "Drop", "Reject")
	f.oneOf("spec.serviceLoopPrevention", s.ServiceLoopPrevention, "Drop", "Reject", "Disabled")
	f.oneOf("spec.natOutgoingExclusions", s.NATOutgoingExclusions, "IPPoolsOnly", "IPPoolsAndHostIPs")
	f.oneOf("spec.workloadSourceSpoofing", s.WorkloadSourceSpoofing, "Disabled", "Any")
	if msg := LogPrefixProblem(s.LogPrefix); s.LogPrefix != "" && msg != "" {
		f.add("spec.logPrefix", s.LogPrefix, msg)
	}
	if v := s.LogActionRateLimit; v != "" && !LogRateLimitRE().MatchString(v) {
		f.add("spec.logActionRateLimit", v, "must be N/unit: N 1-9999, unit second, minute, hour or day (e.g. 10/second)")
	}
	if v := s.IptablesNATOutgoingInterfaceFilter; v != "" && !IfaceFilterRE().MatchString(v) {
		f.add("spec.iptablesNATOutgoingInterfaceFilter", v, "must be an interface name or prefix+ (letters, digits, and : . _ + -; at most 15)")
	}
	f.oneOf("spec.ipForwarding", s.IPForwarding, "Enabled", "Disabled")
	f.oneOf("spec.routeSource", s.RouteSource, "WorkloadIPs", "CalicoIPAM")
	f.oneOf("spec.programClusterRoutes", s.ProgramClusterRoutes, "Enabled", "Disabled")
	if s.BPFLogLevel != nil {
		f.oneOf("spec.bpfLogLevel", *s.BPFLogLevel, "", "Off", "Info", "Debug")
	}
	if c, k, ca := s.PrometheusMetricsCertFile, s.PrometheusMetricsKeyFile, s.PrometheusMetricsCAFile; (c != "" || k != "" || ca != "") && (c == "" || k == "" || ca == "") {
		for _, m := range []struct{ field, v string }{{"spec.prometheusMetricsCertFile", c}, {"spec.prometheusMetricsKeyFile", k}, {"spec.prometheusMetricsCAFile", ca}} {
			if m.v == "" {
				f.add(m.field, "", "must be set with the other prometheusMetrics*File fields: TLS needs the certificate, key and CA files together")
			}
		}
	}
	if s.FloatingIPs != nil {
		f.oneOf("spec.floatingIPs", *s.FloatingIPs, "Enabled", "Disabled")
	}
	if p := s.EndpointStatusPathPrefix; p != nil && *p != "" && *p != "none" && !strings.HasPrefix(*p, "/") {
		f.add("spec.endpointStatusPathPrefix", *p, "must be an absolute directory path, or none (or empty) to write no endpoint status files")
	}
	if s.IptablesMarkMask != nil && bits.OnesCount32(*s.IptablesMarkMask) < 3 {
		f.add("spec.iptablesMarkMask", strconv.FormatUint(uint64(*s.IptablesMarkMask), 10), "must have at least 3 bits set (accept, pass and scratch marks)")
	}
	for _, fp := range []struct {
		path  string
		ports *[]ProtoPort
	}{{"spec.failsafeInboundHostPorts", s.FailsafeInboundHostPorts}, {"spec.failsafeOutboundHostPorts", s.FailsafeOutboundHostPorts}} {
		if fp.ports == nil {
			continue
		}
		for i, pp := range *fp.ports {
			p := idx(fp.path, i)
			// Any case, as Calico accepts (its own objects carry "tcp") and
			// the agent reads it (felix/calc/desired.go).
			if up := strings.ToUpper(pp.Protocol); up != "TCP" && up != "UDP" && up != "SCTP" {
				f.oneOf(p+".protocol", pp.Protocol, "TCP", "UDP", "SCTP")
			}
			if pp.Protocol == "" {
				f.add(p+".protocol", "", "is required")
			}
			if pp.Net != "" {
				f.cidr(p+".net", pp.Net, 0, false)
			}
		}
	}
	f.ip("spec.natOutgoingAddress", s.NATOutgoingAddress, 4)
	f.ip("spec.deviceRouteSourceAddress", s.DeviceRouteSourceAddress, 4)
	f.ip("spec.deviceRouteSourceAddressIPv6", s.DeviceRouteSourceAddressIPv6, 6)
	if s.NATPortRange != nil {
		if msg := s.NATPortRange.problem(); msg != "" || s.NATPortRange.PortName != "" {
			f.add("spec.natPortRange", s.NATPortRange.String(), "must be a port or port range")
		}
	}
	if s.HealthTimeoutOverrides != nil {
		for i, o := range *s.HealthTimeoutOverrides {
			if !HealthReporterRE().MatchString(o.Name) {
				f.add(idx("spec.healthTimeoutOverrides", i)+".name", o.Name, "must be a health reporter's name (letters, digits, '_', '.', '-')")
			}
			if o.Timeout.Duration < 0 {
				f.add(idx("spec.healthTimeoutOverrides", i)+".timeout", o.Timeout.String(), "must not be negative")
			}
		}
	}
	if s.KubeNodePortRanges != nil {
		for i, p := range *s.KubeNodePortRanges {
			if msg := p.problem(); msg != "" || p.PortName != "" {
				f.add(idx("spec.kubeNodePortRanges", i), p.String(), "must be a port or port range min:max (1-65535; a name is refused, as Calico's Felix refuses it)")
			}
		}
	}
	for _, pp := range []struct {
		field string
		v     *int
		lo    int
		hi    int
	}{
		{"spec.healthPort", s.HealthPort, 1, 65535},
		{"spec.prometheusMetricsPort", s.PrometheusMetricsPort, 1, 65535},
		{"spec.vxlanPort", s.VXLANPort, 1, 65535},
		{"spec.wireguardListeningPort", s.WireguardListeningPort, 1, 65535},
		{"spec.vxlanVNI", s.VXLANVNI, 1, 1<<24 - 1},
		{"spec.ipipMTU", s.IPIPMTU, 0, 65535},
		{"spec.vxlanMTU", s.VXLANMTU, 0, 65535},
		{"spec.vxlanMTUV6", s.VXLANMTUV6, 0, 65535},
		{"spec.wireguardMTU", s.WireguardMTU, 0, 65535},
		{"spec.deviceRouteProtocol", s.DeviceRouteProtocol, 0, 255},
		{"spec.maxIpsetSize", s.MaxIpsetSize, 1, 1<<31 - 1}, // Calico: non-zero
		{"spec.logActionRateLimitBurst", s.LogActionRateLimitBurst, 0, 9999},
		{"spec.ipv4NormalRoutePriority", s.IPv4NormalRoutePriority, 1, MaxRoutePriority},
		{"spec.ipv6NormalRoutePriority", s.IPv6NormalRoutePriority, 1, MaxRoutePriority},
		{"spec.ipv4ElevatedRoutePriority", s.IPv4ElevatedRoutePriority, 1, MaxRoutePriority},
		{"spec.ipv6ElevatedRoutePriority", s.IPv6ElevatedRoutePriority, 1, MaxRoutePriority},
	} {
		if pp.v != nil && (*pp.v < pp.lo || *pp.v > pp.hi) {
			f.add(pp.field, strconv.Itoa(*pp.v), "must be "+strconv.Itoa(pp.lo)+"-"+strconv.Itoa(pp.hi))
		}
	}
	if p := s.LogFilePath; p != "" && !strings.EqualFold(p, "none") && (!strings.HasPrefix(p, "/") || strings.HasSuffix(p, "/")) {
		f.add("spec.logFilePath", p, "must be an absolute file path or none")
	}
	for _, h := range []struct {
		field string
		v     *string
	}{{"spec.healthHost", s.HealthHost}, {"spec.prometheusMetricsHost", &s.PrometheusMetricsHost}} {
		if h.v == nil || (*h.v == "" && h.field == "spec.prometheusMetricsHost") {
			continue
		}
		if *h.v == "" || strings.ContainsAny(*h.v, " /[]") || strings.Contains(*h.v, ":") && !isIP(*h.v) {
			f.add(h.field, *h.v, "must be a host name or IP address")
		}
	}
	for _, m := range []struct {
		field string
		v     *int
	}{{"spec.ipipMTU", s.IPIPMTU}, {"spec.vxlanMTU", s.VXLANMTU}, {"spec.vxlanMTUV6", s.VXLANMTUV6}, {"spec.wireguardMTU", s.WireguardMTU}} {
		if m.v != nil && *m.v > 0 && *m.v < 68 { // the kernel's minimum
			f.add(m.field, strconv.Itoa(*m.v), "must be 0 (computed) or 68-65535")
		}
	}
	if r := s.RouteTableRange; r != nil && (r.Min < 1 || r.Max < r.Min || r.Max > 250) {
		f.add("spec.routeTableRange", strconv.Itoa(r.Min)+"-"+strconv.Itoa(r.Max), "must be a range within 1-250")
	}
	if s.RouteTableRanges != nil {
		for i, r := range *s.RouteTableRanges {
			if msg := r.Problem(); msg != "" {
				f.add(idx("spec.routeTableRanges", i), strconv.Itoa(r.Min)+"-"+strconv.Itoa(r.Max), msg)
			}
		}
		if RouteTablesTargeted(*s.RouteTableRanges) > MaxRouteTables {
			f.add("spec.routeTableRanges", strconv.Itoa(len(*s.RouteTableRanges))+" ranges", "targets too many tables (at most "+strconv.Itoa(MaxRouteTables)+")")
		}
	}
	if s.MTUIfacePattern != "" {
		if _, err := regexp.Compile(s.MTUIfacePattern); err != nil {
			f.add("spec.mtuIfacePattern", s.MTUIfacePattern, "is not a valid regular expression")
		}
	}
	if msg := InterfaceExcludeProblem(s.InterfaceExclude); msg != "" {
		f.add("spec.interfaceExclude", s.InterfaceExclude, msg)
	}
	if s.InterfacePrefix != "" && !ifaceListRe().MatchString(s.InterfacePrefix) {
		f.add("spec.interfacePrefix", s.InterfacePrefix, "must be a comma-separated list of interface name prefixes (1-15 characters: letters, digits, '_', '-')")
	}
	for _, d := range []struct {
		field string
		d     *Duration
	}{
		{"spec.reportingInterval", s.ReportingInterval}, {"spec.reportingTTL", s.ReportingTTL},
		{"spec.endpointReportingDelay", s.EndpointReportingDelay}, {"spec.iptablesLockProbeInterval", s.IptablesLockProbeInterval},
		{"spec.iptablesRefreshInterval", s.IptablesRefreshInterval}, {"spec.iptablesLockTimeout", s.IptablesLockTimeout},
		{"spec.routeRefreshInterval", s.RouteRefreshInterval}, {"spec.interfaceRefreshInterval", s.InterfaceRefreshInterval},
		{"spec.ipsetsRefreshInterval", s.IpsetsRefreshInterval}, {"spec.netlinkTimeout", s.NetlinkTimeout},
	} {
		if d.d != nil && d.d.Duration < 0 {
			f.add(d.field, d.d.String(), "must not be negative")
		}
	}
	return f.join()
}

// ifaceListRe is Felix's interface list (interfacePrefix): names of 1-15
// letters, digits, '_' or '-', joined by commas.
var ifaceListRe = lazyRegexp(`^[a-zA-Z0-9_-]{1,15}(,[a-zA-Z0-9_-]{1,15})*$`)

// InterfaceExcludeProblem checks interfaceExclude as Felix parses it:
// comma-separated items, each an interface name (1-15 letters, digits,
// '_' or '-') or a /regexp/ ("" when fine).
func InterfaceExcludeProblem(s string) string {
	if s == "" {
		return ""
	}
	for i, item := range strings.Split(s, ",") {
		if len(item) > 2 && strings.HasPrefix(item, "/") && strings.HasSuffix(item, "/") && !strings.ContainsAny(item, " \t\n") {
			if _, err := regexp.Compile(item[1 : len(item)-1]); err != nil {
				return "item " + strconv.Itoa(i) + " is not a valid regular expression"
			}
			continue
		}
		if !ifaceNameRe().MatchString(item) {
			return "item " + strconv.Itoa(i) + " must be an interface name (1-15 characters: letters, digits, '_', '-') or a /regexp/"
		}
	}
	return ""
}

var ifaceNameRe = lazyRegexp(`^[a-zA-Z0-9_-]{1,15}$`)

func isIP(s string) bool { _, err := netip.ParseAddr(s); return err == nil }
