package rules

import (
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/calico-aio/calico-aio/iptables"
)

// ProtoPort is a failsafe port: traffic of Protocol ("tcp", "udp") to Port
// is always accepted to (inbound) or from (outbound) the host. Net, when
// valid, limits it to a source (inbound) or destination (outbound) network.
type ProtoPort struct {
	Protocol string
	Port     uint16
	Net      netip.Prefix
}

// Config is what the renderer needs of Felix's configuration.
type Config struct {
	IPVersion int // 6 renders for ip6tables; anything else for iptables (IPv4)
	// DefaultEndpointToHostAction is what happens to traffic from a
	// workload to the host once the workload's egress policy allowed it:
	// "Drop" (the default), "Accept", or "Return" (the host's own INPUT
	// rules decide).
	DefaultEndpointToHostAction string
	// Failsafe ports: nil means Calico's defaults; an empty, non-nil list
	// means none (and no failsafe chains). As in Calico they only matter
	// once host endpoints are policed: without HostEndpoints the host's own
	// INPUT/OUTPUT rules decide and no failsafe chain is rendered.
	FailsafeInbound, FailsafeOutbound []ProtoPort
	// HostEndpoints says host endpoint policy is active (then failsafe
	// ports are accepted ahead of it).
	HostEndpoints bool
	// WorkloadIfacePrefix names the workload interfaces: FelixConfiguration
	// interfacePrefix, a comma-separated list of prefixes ("cali,tap");
	// "cali" when empty.
	WorkloadIfacePrefix string
	// ExcludeIfaces are host interfaces a "*" host endpoint leaves
	// unpoliced (FelixConfiguration interfaceExclude, resolved to names).
	ExcludeIfaces []string
	// FilterAllowAction is FelixConfiguration iptablesFilterAllowAction:
	// what the filter table does with traffic policy accepted, "Accept"
	// (the default: ACCEPT, later rules in the built-in chain are skipped)
	// or "Return" (RETURN: they still see it).
	FilterAllowAction string
	// MangleAllowAction is iptablesMangleAllowAction, the same for the
	// mangle table (pre-DNAT policy).
	MangleAllowAction string
	// NATOutgoingAddress, when valid, is the IPv4 source address traffic
	// from natOutgoing pools leaving them gets (SNAT) instead of the
	// outgoing interface's (MASQUERADE). NATPortMin/Max, when set, limit
	// the source ports of TCP and UDP so translated.
	NATOutgoingAddress     netip.Addr
	NATPortMin, NATPortMax uint16
	// NATOutgoingExcludeHosts is natOutgoingExclusions IPPoolsAndHostIPs:
	// traffic to a Calico node's address (IPv4) is not NATed either.
	NATOutgoingExcludeHosts bool
	// NATOutgoingInterface is iptablesNATOutgoingInterfaceFilter: when
	// set, only traffic leaving by this interface (iptables -o syntax,
	// "+" a wildcard) is NATed.
	NATOutgoingInterface string
	// Packet mark bits, each a distinct single bit; zero means the default
	// (0x10000, 0x20000, 0x40000).
	MarkAccept, MarkPass, MarkScratch uint32
	// VXLANPort is the UDP port workloads may not send VXLAN to (0: 4789).
	VXLANPort int
	// AllowVXLANPacketsFromWorkloads and AllowIPIPPacketsFromWorkloads
	// (FelixConfiguration, default false) lift the drop of encapsulated
	// packets a workload sends.
	AllowVXLANPacketsFromWorkloads, AllowIPIPPacketsFromWorkloads bool
	// PoliceEgressBandwidth: endpoints' egress bandwidth is policed by
	// hashlimit rules (qos.go), because the kernel cannot shape it on an
	// ifb (felix/dataplane.EgressShapingSupported is false).
	PoliceEgressBandwidth bool
	// FilterDenyAction is iptablesFilterDenyAction: what the filter table
	// does with traffic policy denied, "Drop" (the default: DROP) or
	// "Reject" (REJECT). The raw and mangle tables always DROP: REJECT
	// exists only in the filter table.
	FilterDenyAction string
	// DisableConntrackInvalid is disableConntrackInvalidCheck: no rule
	// denies packets conntrack calls INVALID.
	DisableConntrackInvalid bool
	// LogPrefix is logPrefix, the prefix of Log rules' kernel log lines
	// (DefaultLogPrefix when empty); as Calico's, the rule logs
	// "<prefix>: ". Validation keeps it to characters and a length
	// iptables takes.
	LogPrefix string
	// LogRateLimit is logActionRateLimit ("10/second"; "" no limit): Log
	// rules match only this often, in bursts of LogRateLimitBurst
	// (logActionRateLimitBurst), as Calico renders them (-m limit).
	LogRateLimit      string
	LogRateLimitBurst int
	// KubeIPVS turns on kube-proxy IPVS mode (ipvs.go): a kube-ipvs0
	// interface exists. MarkMask is iptablesMarkMask (0: the default),
	// whose bits above the lowest five hold the endpoint mark, and
	// KubeNodePortRanges is kubeNodePortRanges (empty: 30000:32767).
	KubeIPVS           bool
	MarkMask           uint32
	KubeNodePortRanges NodePortRanges
}

// Calico's default failsafe ports (FailsafeInboundHostPorts and
// FailsafeOutboundHostPorts).
var (
	DefaultFailsafeInbound = protoPorts("tcp:22", "udp:68", "tcp:179", "tcp:2379", "tcp:2380",
		"tcp:5473", "tcp:6443", "tcp:6666", "tcp:6667")
	DefaultFailsafeOutbound = protoPorts("udp:53", "udp:67", "tcp:179", "tcp:2379", "tcp:2380",
		"tcp:5473", "tcp:6443", "tcp:6666", "tcp:6667")
)

// protoPorts builds a constant failsafe list from "proto:port" items.
func protoPorts(items ...string) []ProtoPort {
	out := make([]ProtoPort, len(items))
	for i, it := range items {
		proto, port, _ := strings.Cut(it, ":")
		n, err := strconv.ParseUint(port, 10, 16)
		if err != nil {
			panic(err)
		}
		out[i] = ProtoPort{Protocol: proto, Port: uint16(n)}
	}
	return out
}

// Default mark bits, as Calico's default IptablesMarkMask 0xffff0000 hands
// them out: accept, pass, scratch.
const (
	DefaultMarkAccept  uint32 = 0x10000
	DefaultMarkPass    uint32 = 0x20000
	DefaultMarkScratch uint32 = 0x40000
)

// MarksFromMask hands out the accept, pass and scratch bits from mask
// (FelixConfiguration iptablesMarkMask) as Felix does: its lowest set bits,
// in that order. A mask with fewer than three bits gives zeros (the
// defaults) for what it cannot cover; validation refuses such a mask.
func MarksFromMask(mask uint32) (accept, pass, scratch uint32) {
	var bits []uint32
	for b := uint32(1); b != 0 && len(bits) < 3; b <<= 1 {
		if mask&b != 0 {
			bits = append(bits, b)
		}
	}
	bits = append(bits, 0, 0, 0)
	return bits[0], bits[1], bits[2]
}

// withDefaults fills in the zero values.
func (c Config) withDefaults() Config {
	if c.IPVersion != 6 {
		c.IPVersion = 4
	}
	if c.FailsafeInbound == nil {
		c.FailsafeInbound = DefaultFailsafeInbound
	}
	if c.FailsafeOutbound == nil {
		c.FailsafeOutbound = DefaultFailsafeOutbound
	}
	if c.WorkloadIfacePrefix == "" {
		c.WorkloadIfacePrefix = "cali"
	}
	if c.MarkAccept == 0 {
		c.MarkAccept = DefaultMarkAccept
	}
	if c.MarkPass == 0 {
		c.MarkPass = DefaultMarkPass
	}
	if c.MarkScratch == 0 {
		c.MarkScratch = DefaultMarkScratch
	}
	return c
}

// workloadPrefixes are the prefixes of WorkloadIfacePrefix, in order,
// without repeats.
func (c Config) workloadPrefixes() []string {
	var out []string
	for _, p := range strings.Split(c.WorkloadIfacePrefix, ",") {
		if p = strings.TrimSpace(p); p != "" && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		return []string{"cali"}
	}
	return out
}

// workloadPrefixOf is the workload prefix iface has ("" for none).
func (c Config) workloadPrefixOf(iface string) string {
	if one := strings.TrimSpace(c.WorkloadIfacePrefix); !strings.Contains(one, ",") { // the usual case, per endpoint: no allocation
		if one == "" {
			one = "cali"
		}
		if strings.HasPrefix(iface, one) {
			return one
		}
		return ""
	}
	for _, p := range c.workloadPrefixes() {
		if strings.HasPrefix(iface, p) {
			return p
		}
	}
	return ""
}

// IsWorkloadIface reports whether iface is a workload interface's name.
func (c Config) IsWorkloadIface(iface string) bool { return c.workloadPrefixOf(iface) != "" }

// workloadMatches are the iptables matches of every workload interface,
// one per prefix: flag is "-i" or "-o".
func (c Config) workloadMatches(flag string) []string {
	var out []string
	for _, p := range c.workloadPrefixes() {
		out = append(out, flag+" "+p+"+")
	}
	return out
}

// pick is then when setting names alt (case-insensitively), else
// otherwise: the verdicts below read their FelixConfiguration field so.
func pick(setting, alt, then, otherwise string) string {
	if strings.EqualFold(setting, alt) {
		return then
	}
	return otherwise
}

// filterAllow is the target for traffic policy accepted, in the filter
// table.
func (c Config) filterAllow() string {
	return pick(c.FilterAllowAction, "return", "-j RETURN", "-j ACCEPT")
}

// mangleAllow is the target for traffic policy accepted, in the mangle
// table.
func (c Config) mangleAllow() string {
	return pick(c.MangleAllowAction, "return", "-j RETURN", "-j ACCEPT")
}

// filterDeny is the target for traffic policy denied, in the filter
// table.
func (c Config) filterDeny() string {
	return pick(c.FilterDenyAction, "reject", "-j REJECT", "-j DROP")
}

// denyWord is the verdict's word in rule comments, as Calico writes it
// ("Drop if no profiles matched", "Reject if ...").
func (c Config) denyWord() string { return pick(c.FilterDenyAction, "reject", "Reject", "Drop") }

// logAction is the LOG target of Log rules, as Calico renders it.
func (c Config) logAction() string {
	p := c.LogPrefix
	if p == "" {
		p = DefaultLogPrefix
	}
	return `-j LOG --log-prefix "` + p + `: " --log-level 5`
}

// DefaultLogRateLimitBurst is Calico's logActionRateLimitBurst.
const DefaultLogRateLimitBurst = 5

// logMatch is match with the Log rule's rate limit, if any.
func (c Config) logMatch(match string) string {
	if c.LogRateLimit == "" {
		return match
	}
	return strings.TrimSpace(match + " -m limit --limit " + c.LogRateLimit + " --limit-burst " + strconv.Itoa(c.LogRateLimitBurst))
}

// endpointToHostAction is the iptables target of DefaultEndpointToHostAction.
func (c Config) endpointToHostAction() string {
	switch strings.ToLower(c.DefaultEndpointToHostAction) {
	case "accept":
		return "-j ACCEPT"
	case "return":
		return "-j RETURN"
	}
	return "-j DROP"
}

// natOutgoingRules is the cali-nat-outgoing rules for traffic matching
// match (and leaving by NATOutgoingInterface, when set): MASQUERADE, or
// SNAT to NATOutgoingAddress (IPv4), with the port range for TCP and UDP
// first when one is set.
func (c Config) natOutgoingRules(match string) []iptables.Rule {
	target := func(ports bool) string {
		pr := ""
		if ports {
			pr = strconv.Itoa(int(c.NATPortMin)) + "-" + strconv.Itoa(int(c.NATPortMax))
		}
		switch {
		case c.IPVersion != 6 && c.NATOutgoingAddress.Is4() && ports:
			return "-j SNAT --to-source " + c.NATOutgoingAddress.String() + ":" + pr
		case c.IPVersion != 6 && c.NATOutgoingAddress.Is4():
			return "-j SNAT --to-source " + c.NATOutgoingAddress.String()
		case ports:
			return "-j MASQUERADE --to-ports " + pr
		}
		return "-j MASQUERADE"
	}
	if c.NATOutgoingInterface != "" {
		match += " -o " + c.NATOutgoingInterface
	}
	var out []iptables.Rule
	if c.NATPortMin != 0 {
		for _, proto := range []string{"tcp", "udp"} {
			out = append(out, rule("-p "+proto+" "+match, target(true), ""))
		}
	}
	return append(out, rule(match, target(false), ""))
}

// Tables is the desired content of our chains, per table, in a fixed order.
type Tables struct {
	Filter, NAT, Mangle, Raw []iptables.Chain
}

// Input is the resolved state to render for one IP version.
type Input struct {
	Endpoints        []Endpoint           // local endpoints (this node)
	HostEndpoints    []HostEndpoint       // this node's host endpoints, one per interface
	Policies         map[PolicyKey]Policy // at least those the endpoints use
	Profiles         map[string]Profile
	NATOutgoingPools []netip.Prefix // pools with natOutgoing, of the IP version
	AllPools         []netip.Prefix // all pools of the IP version
	// Memo, when set, keeps chains between calls (memo.go);
	// the output is the same without it.
	Memo *Memo
}

// PoolSetMembers is what an IPSetPools set holds: the natOutgoing pools or
// all pools, of the set's IP version.
func (in Input) PoolSetMembers(spec IPSetSpec) []netip.Prefix {
	if spec.NATOutgoing {
		return in.NATOutgoingPools
	}
	return in.AllPools
}

// Mark helpers: iptables text for the mark operations we use.

func hexMark(v uint32) string { return "0x" + strconv.FormatUint(uint64(v), 16) }

// markSet matches packets with all bits of m set.
func markSet(m uint32) string { return "-m mark --mark " + hexMark(m) + "/" + hexMark(m) }

// markClear matches packets with all bits of m clear.
func markClear(m uint32) string { return "-m mark --mark 0x0/" + hexMark(m) }

// markAny matches packets with any bit of m set.
func markAny(m uint32) string { return "-m mark ! --mark 0x0/" + hexMark(m) }

// setMark sets the bits of m, leaving the others.
func setMark(m uint32) string { return "-j MARK --set-xmark " + hexMark(m) + "/" + hexMark(m) }

// clearMark clears the bits of m, leaving the others.
func clearMark(m uint32) string { return "-j MARK --set-xmark 0x0/" + hexMark(m) }

// setMarkClearing sets the bits of m and clears those of also.
func setMarkClearing(m, also uint32) string {
	return "-j MARK --set-xmark " + hexMark(m) + "/" + hexMark(m|also)
}
