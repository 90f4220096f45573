package calc

import (
	"cmp"
	"net/netip"
	"slices"
	"sort"
	"strings"

	"github.com/calico-aio/calico-aio/felix/rules"
	"github.com/calico-aio/calico-aio/internal/epstatus"
	"github.com/calico-aio/calico-aio/store/api"
)

// LocalEndpoint is a local workload interface with its addresses and the
// pod-side MAC.
type LocalEndpoint struct {
	Iface string
	Addrs []netip.Addr
	MAC   string
	// Status key parts for the felix status report.
	Orchestrator, Workload, Endpoint string
	// StatusFile names the endpoint's status file (internal/epstatus).
	StatusFile string
	// QoS is the endpoint's qosControls with Calico's defaults; nil: none.
	QoS *api.QoSControls
}

// Desired is the whole desired dataplane state.
type Desired struct {
	Tables        map[int]rules.Tables // by IP version
	IPSets        map[string]IPSet
	Endpoints     []LocalEndpoint
	Blackholes    []netip.Prefix // this node's affine blocks
	LocalPolicies int            // policies applied to local endpoints
	// IPForwarding is FelixConfiguration spec.ipForwarding ("default"
	// overlaid by "node.<name>"); empty means the default, Enabled.
	IPForwarding string
	IPv6         bool // the IPv6 dataplane is on (Tables has version 6)
}

// Desired computes the desired dataplane state, updating the incremental
// caches for what changed since the last call.
func (s *State) Desired(ipv6 bool) Desired {
	s.refreshLocalPolicies()
	base := s.rulesConfig()
	spoofing := s.workloadSourceSpoofing()
	floating := s.floatingIPsEnabled()
	d := Desired{Tables: map[int]rules.Tables{}, IPForwarding: s.ipForwarding(), IPv6: ipv6}
	// Endpoints in interface order (ties by key), the order Render wants:
	// it then takes them as they are instead of sorting a copy.
	keys := make([]ifaceKey, 0, len(s.localPolicies))
	for k := range s.localPolicies {
		keys = append(keys, ifaceKey{s.weps[k].Spec.InterfaceName, k})
	}
	slices.SortFunc(keys, func(a, b ifaceKey) int {
		return cmp.Or(strings.Compare(a.iface, b.iface), strings.Compare(a.key, b.key))
	})
	used := map[rules.PolicyKey]bool{}
	// Render keeps nothing of eps (its memo copies what it keeps): the
	// buffer serves the next calculation too.
	eps := slices.Grow(s.epsBuf[:0], len(keys))
	defer func() { clear(eps); s.epsBuf = eps[:0] }()
	d.Endpoints = make([]LocalEndpoint, 0, len(keys))
	s.desiredCalls++
	defer s.forgetLocalEndpoints()
	for _, ik := range keys {
		k, w := ik.key, s.weps[ik.key]
		if !base.IsWorkloadIface(w.Spec.InterfaceName) {
			continue // not a workload interface (interfacePrefix): no route, policy or sysctls, as in Calico
		}
		in, out := s.endpointTiers(k)
		for _, ts := range [][]rules.Tier{in, out} {
			for _, t := range ts {
				for _, p := range t.Policies {
					used[p] = true
				}
			}
		}
		ep, le := s.localEndpoint(k, w, floating, spoofing)
		ep.IngressTiers, ep.EgressTiers = in, out
		if ep.Iface == "" {
			continue
		}
		eps = append(eps, ep)
		d.Endpoints = append(d.Endpoints, le)
	}
	heps, hepPolicies := s.localHostEndpoints()
	for _, k := range hepPolicies {
		used[k] = true
	}
	d.LocalPolicies = len(used)
	policies := make(map[rules.PolicyKey]rules.Policy, len(used))
	for k := range used {
		policies[k] = s.policies[k].rules
	}
	profiles := map[string]rules.Profile{}
	var profileNames []string
	for _, ep := range eps {
		profileNames = append(profileNames, ep.Profiles...)
	}
	for _, h := range heps {
		profileNames = append(profileNames, h.Profiles...)
	}
	for _, name := range profileNames {
		if p, ok := s.profiles[name]; ok {
			profiles[name] = rules.Profile{Name: name, Ingress: p.Spec.Ingress, Egress: p.Spec.Egress}
		}
	}
	keep := map[string]bool{}
	for _, ver := range []int{4, 6} {
		if ver == 6 && !ipv6 {
			continue
		}
		cfg := base
		cfg.IPVersion = ver
		if s.memos[ver] == nil {
			s.memos[ver] = &rules.Memo{}
		}
		in := rules.Input{Endpoints: familyEndpoints(eps, ver), HostEndpoints: heps, Policies: policies, Profiles: profiles,
			Memo: s.memos[ver]}
		in.NATOutgoingPools, in.AllPools = s.poolPrefixes(ver)
		tables, specs := rules.Render(cfg, in)
		d.Tables[ver] = tables
		s.refreshIPSets(specs, keep)
	}
	for name := range s.members {
		if !keep[name] {
			delete(s.members, name)
		}
	}
	clear(s.dirtySources)
	d.IPSets = s.ipsetsDesired()
	d.Blackholes = s.Blackholes(ipv6)
	return d
}

// Blackholes is Desired's Blackholes alone: this node's affine blocks,
// sorted. IPAM blocks feed nothing else of Desired, so a change to blocks
// only (every pod ADD and DEL writes its block) needs this, not a render.
func (s *State) Blackholes(ipv6 bool) []netip.Prefix {
	var out []netip.Prefix
	for cidr, b := range s.blocks {
		if b.AffineTo(s.node) {
			if p, err := netip.ParsePrefix(cidr); err == nil && (ipv6 || p.Addr().Is4()) {
				out = append(out, p)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

// localEndpointMemo is what localEndpoint made of one workload endpoint
// object with the two settings it read.
type localEndpointMemo struct {
	w                  *api.WorkloadEndpoint
	floating, spoofing bool
	ep                 rules.Endpoint // without its tiers
	le                 LocalEndpoint
	call               uint64 // the Desired call that last used it
}

// localEndpoint is endpoint w (key k) as the rules (without its tiers) and
// the dataplane take it, made again only when w was replaced or the
// floating IP or spoofing setting changed since the last Desired (a pod
// added to a full node converts its own endpoint, not every one).
func (s *State) localEndpoint(k string, w *api.WorkloadEndpoint, floating, spoofing bool) (rules.Endpoint, LocalEndpoint) {
	if m, ok := s.localEndpoints[k]; ok && m.w == w && m.floating == floating && m.spoofing == spoofing {
		m.call = s.desiredCalls
		return m.ep, m.le
	}
	qos := w.Spec.QoSControls.WithDefaults()
	ep := rules.Endpoint{Iface: w.Spec.InterfaceName, Profiles: w.Spec.Profiles, QoS: qos}
	le := LocalEndpoint{Iface: w.Spec.InterfaceName, MAC: w.Spec.MAC, Orchestrator: w.Spec.Orchestrator, Endpoint: w.Spec.Endpoint, Workload: workloadID(w),
		StatusFile: epstatus.FileName(w), QoS: qos}
	for _, n := range w.Spec.IPNetworks {
		if p, err := netip.ParsePrefix(n); err == nil {
			ep.Addrs = append(ep.Addrs, p.Addr())
		}
	}
	le.Addrs = slices.Clip(ep.Addrs)
	ep.Addrs = le.Addrs
	// As in Calico, floatingIPs Disabled (the default) drops the
	// ipNATs of every endpoint but OpenStack's.
	for _, nat := range w.Spec.IPNATs {
		if !floating && w.Spec.Orchestrator != orchestratorOpenStack {
			break
		}
		in, err1 := netip.ParseAddr(nat.InternalIP)
		ex, err2 := netip.ParseAddr(nat.ExternalIP)
		if err1 == nil && err2 == nil {
			ep.NATs = append(ep.NATs, rules.NAT{Internal: in, External: ex})
		}
	}
	// As in Calico, a workload's allowSpoofedSourcePrefixes count only
	// while workloadSourceSpoofing is Any.
	for _, n := range w.Spec.AllowSpoofedSourcePrefixes {
		if p, err := netip.ParsePrefix(n); err == nil && spoofing {
			ep.AllowSpoofedFrom = append(ep.AllowSpoofedFrom, p)
		}
	}
	s.localEndpoints[k] = &localEndpointMemo{w: w, floating: floating, spoofing: spoofing, ep: ep, le: le, call: s.desiredCalls}
	return ep, le
}

// forgetLocalEndpoints drops the conversions and tier memos the last
// Desired did not use.
func (s *State) forgetLocalEndpoints() {
	for k, m := range s.localEndpoints {
		if m.call != s.desiredCalls {
			delete(s.localEndpoints, k)
		}
	}
	for k, m := range s.tierMemos {
		if m.call != s.desiredCalls {
			delete(s.tierMemos, k)
		}
	}
}

// ifaceKey is a local endpoint's interface name and key.
type ifaceKey struct{ iface, key string }

// familyEndpoints keeps each endpoint's addresses of one IP version.
func familyEndpoints(eps []rules.Endpoint, ver int) []rules.Endpoint {
	if !slices.ContainsFunc(eps, func(ep rules.Endpoint) bool { return !oneFamily(ep, ver) }) {
		return eps // every endpoint of this version only (the usual case): no copy
	}
	out := make([]rules.Endpoint, len(eps))
	for i, ep := range eps {
		ep.Addrs = filterAddrs(ep.Addrs, ver)
		var nats []rules.NAT
		for _, n := range ep.NATs {
			if n.Internal.Is4() == (ver == 4) {
				nats = append(nats, n)
			}
		}
		ep.NATs = nats
		out[i] = ep
	}
	return out
}

// oneFamily reports whether ep's addresses and NATs are all of version ver.
func oneFamily(ep rules.Endpoint, ver int) bool {
	return addrsOf(ep.Addrs, ver) && !slices.ContainsFunc(ep.NATs, func(n rules.NAT) bool { return n.Internal.Is4() != (ver == 4) })
}

// addrsOf reports whether every address of as is of version ver.
func addrsOf(as []netip.Addr, ver int) bool {
	return !slices.ContainsFunc(as, func(a netip.Addr) bool { return a.Is4() != (ver == 4) })
}

func filterAddrs(as []netip.Addr, ver int) []netip.Addr {
	if addrsOf(as, ver) {
		return as // one family already (the usual case): no copy
	}
	var out []netip.Addr
	for _, a := range as {
		if a.Is4() == (ver == 4) {
			out = append(out, a)
		}
	}
	return out
}

func (s *State) poolPrefixes(ver int) (masq, all []netip.Prefix) {
	for _, p := range s.pools {
		pr, err := netip.ParsePrefix(p.Spec.CIDR)
		if err != nil || pr.Addr().Is4() != (ver == 4) || p.Spec.Disabled {
			continue
		}
		all = append(all, pr.Masked())
		if p.Spec.NATOutgoing {
			masq = append(masq, pr.Masked())
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].String() < all[j].String() })
	sort.Slice(masq, func(i, j int) bool { return masq[i].String() < masq[j].String() })
	return masq, all
}

// workloadID is the workload part of an endpoint's status key.
func workloadID(w *api.WorkloadEndpoint) string {
	if w.Spec.Pod != "" {
		return w.Metadata.Namespace + "/" + w.Spec.Pod
	}
	if w.Spec.Workload != "" {
		return w.Spec.Workload
	}
	return w.Spec.ContainerID
}

// rulesConfig reads FelixConfiguration "default" overlaid by "node.<name>".
func (s *State) rulesConfig() rules.Config {
	cfg := rules.Config{PoliceEgressBandwidth: s.policeEgress}
	for _, name := range []string{"default", "node." + s.node} {
		f, ok := s.felixCfgs[name]
		if !ok {
			continue
		}
		if f.Spec.DefaultEndpointToHostAction != "" {
			cfg.DefaultEndpointToHostAction = f.Spec.DefaultEndpointToHostAction
		}
		if f.Spec.FailsafeInboundHostPorts != nil {
			cfg.FailsafeInbound = protoPorts(*f.Spec.FailsafeInboundHostPorts)
		}
		if f.Spec.FailsafeOutboundHostPorts != nil {
			cfg.FailsafeOutbound = protoPorts(*f.Spec.FailsafeOutboundHostPorts)
		}
		if f.Spec.VXLANPort != nil {
			cfg.VXLANPort = *f.Spec.VXLANPort
		}
		if f.Spec.AllowVXLANPacketsFromWorkloads != nil {
			cfg.AllowVXLANPacketsFromWorkloads = *f.Spec.AllowVXLANPacketsFromWorkloads
		}
		if f.Spec.AllowIPIPPacketsFromWorkloads != nil {
			cfg.AllowIPIPPacketsFromWorkloads = *f.Spec.AllowIPIPPacketsFromWorkloads
		}
		if a, err := netip.ParseAddr(f.Spec.NATOutgoingAddress); err == nil {
			cfg.NATOutgoingAddress = a
		}
		if p := f.Spec.NATPortRange; p != nil && p.PortName == "" {
			cfg.NATPortMin, cfg.NATPortMax = p.MinPort, p.MaxPort
		}
		if p := f.Spec.InterfacePrefix; p != "" {
			cfg.WorkloadIfacePrefix = p
		}
		if a := f.Spec.IptablesFilterAllowAction; a != "" {
			cfg.FilterAllowAction = a
		}
		if a := f.Spec.IptablesMangleAllowAction; a != "" {
			cfg.MangleAllowAction = a
		}
		if m := f.Spec.IptablesMarkMask; m != nil {
			cfg.MarkAccept, cfg.MarkPass, cfg.MarkScratch = rules.MarksFromMask(*m)
		}
		if a := f.Spec.IptablesFilterDenyAction; a != "" {
			cfg.FilterDenyAction = a
		}
		if d := f.Spec.DisableConntrackInvalidCheck; d != nil {
			cfg.DisableConntrackInvalid = *d
		}
		if e := f.Spec.NATOutgoingExclusions; e != "" {
			cfg.NATOutgoingExcludeHosts = strings.EqualFold(e, "IPPoolsAndHostIPs")
		}
		if i := f.Spec.IptablesNATOutgoingInterfaceFilter; i != "" {
			cfg.NATOutgoingInterface = i
		}
		if p := f.Spec.LogPrefix; p != "" {
			cfg.LogPrefix = p
		}
		cfg.LogRateLimit, cfg.LogRateLimitBurst = f.Spec.LogActionRateLimit, rules.DefaultLogRateLimitBurst
		if b := f.Spec.LogActionRateLimitBurst; b != nil {
			cfg.LogRateLimitBurst = *b
		}
	}
	cfg.ExcludeIfaces = s.excludedIfaces()
	s.ipvsConfig(&cfg)
	return cfg
}

// workloadSourceSpoofing reads spec.workloadSourceSpoofing, "default"
// overlaid by "node.<name>": whether it is Any (Calico's default is
// Disabled).
func (s *State) workloadSourceSpoofing() bool {
	mode := ""
	for _, name := range []string{"default", "node." + s.node} {
		if f, ok := s.felixCfgs[name]; ok && f.Spec.WorkloadSourceSpoofing != "" {
			mode = f.Spec.WorkloadSourceSpoofing
		}
	}
	return strings.EqualFold(mode, "Any")
}

// orchestratorOpenStack is Calico's orchestrator ID for OpenStack
// endpoints, whose floating IPs are programmed whatever floatingIPs says.
const orchestratorOpenStack = "openstack"

// floatingIPsEnabled reads spec.floatingIPs, "default" overlaid by
// "node.<name>"; unset is Calico's default, Disabled.
func (s *State) floatingIPsEnabled() bool {
	mode := ""
	for _, name := range []string{"default", "node." + s.node} {
		if f, ok := s.felixCfgs[name]; ok && f.Spec.FloatingIPs != nil {
			mode = *f.Spec.FloatingIPs
		}
	}
	return strings.EqualFold(mode, "Enabled")
}

// ipForwarding reads spec.ipForwarding, "default" overlaid by "node.<name>".
func (s *State) ipForwarding() string {
	mode := ""
	for _, name := range []string{"default", "node." + s.node} {
		if f, ok := s.felixCfgs[name]; ok && f.Spec.IPForwarding != "" {
			mode = f.Spec.IPForwarding
		}
	}
	return mode
}

func protoPorts(in []api.ProtoPort) []rules.ProtoPort {
	out := make([]rules.ProtoPort, 0, len(in))
	for _, p := range in {
		pp := rules.ProtoPort{Protocol: strings.ToLower(p.Protocol), Port: p.Port}
		if n, err := netip.ParsePrefix(p.Net); err == nil {
			pp.Net = n
		}
		out = append(out, pp)
	}
	return out
}
