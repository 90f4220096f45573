package api

import (
	"strconv"
	"strings"
)

// BGPPeer is a BGP session some nodes (all, one, or a selection) make with
// a remote address or with other nodes (peerSelector).
type BGPPeer struct {
	TypeMeta
	Metadata ObjectMeta  `json:"metadata"`
	Spec     BGPPeerSpec `json:"spec"`
}

// BGPPeerSpec is projectcalico.org/v3 BGPPeer.spec.
type BGPPeerSpec struct {
	Node                     string       `json:"node,omitempty"`
	NodeSelector             string       `json:"nodeSelector,omitempty"`
	PeerIP                   string       `json:"peerIP,omitempty"` // IP, IPv4:port or [IPv6]:port
	ASNumber                 ASNumber     `json:"asNumber,omitempty"`
	PeerSelector             string       `json:"peerSelector,omitempty"`
	KeepOriginalNextHop      bool         `json:"keepOriginalNextHop,omitempty"`
	Password                 *BGPPassword `json:"password,omitempty"`
	SourceAddress            string       `json:"sourceAddress,omitempty"` // UseNodeIP or None
	FailureDetectionMode     string       `json:"failureDetectionMode,omitempty"`
	RestartMode              string       `json:"restartMode,omitempty"`
	MaxRestartTime           *Duration    `json:"maxRestartTime,omitempty"`
	BIRDGatewayMode          string       `json:"birdGatewayMode,omitempty"`
	NumAllowedLocalASNumbers *int32       `json:"numAllowedLocalASNumbers,omitempty"`
	TTLSecurity              *uint8       `json:"ttlSecurity,omitempty"`
	KeepaliveTime            *Duration    `json:"keepaliveTime,omitempty"`
	ReachableBy              string       `json:"reachableBy,omitempty"`
	Filters                  []string     `json:"filters,omitempty"`
	LocalWorkloadSelector    string       `json:"localWorkloadSelector,omitempty"`
	NextHopMode              string       `json:"nextHopMode,omitempty"`
	// LocalASNumber is the AS this node presents to the peer instead of
	// its own.
	LocalASNumber *ASNumber `json:"localASNumber,omitempty"`
	// ReversePeering "Manual": the remote side makes no automatic
	// peering back (Calico's default is Auto).
	ReversePeering string `json:"reversePeering,omitempty"`
}

// Reverse peering modes of BGPPeer.spec.reversePeering.
const (
	ReversePeeringAuto   = "Auto"
	ReversePeeringManual = "Manual"
)

// BGPPassword says where a BGP session's password comes from.
type BGPPassword struct {
	SecretKeyRef *SecretKeySelector `json:"secretKeyRef,omitempty"`
}

// SecretKeySelector names one key of a secret.
type SecretKeySelector struct {
	Name     string `json:"name,omitempty"`
	Key      string `json:"key"`
	Optional *bool  `json:"optional,omitempty"`
}

// BGPConfiguration holds BGP settings: "default" for the cluster, or
// "node.<name>" for one node.
type BGPConfiguration struct {
	TypeMeta
	Metadata ObjectMeta           `json:"metadata"`
	Spec     BGPConfigurationSpec `json:"spec"`
}

// BGPConfigurationSpec is projectcalico.org/v3 BGPConfiguration.spec.
// A nil NodeToNodeMeshEnabled means true; a nil ASNumber means 64512.
type BGPConfigurationSpec struct {
	LogSeverityScreen        string                `json:"logSeverityScreen,omitempty"`
	NodeToNodeMeshEnabled    *bool                 `json:"nodeToNodeMeshEnabled,omitempty"`
	ASNumber                 *ASNumber             `json:"asNumber,omitempty"`
	ServiceLoadBalancerIPs   []ServiceIPBlock      `json:"serviceLoadBalancerIPs,omitempty"`
	ServiceExternalIPs       []ServiceIPBlock      `json:"serviceExternalIPs,omitempty"`
	ServiceClusterIPs        []ServiceIPBlock      `json:"serviceClusterIPs,omitempty"`
	Communities              []Community           `json:"communities,omitempty"`
	PrefixAdvertisements     []PrefixAdvertisement `json:"prefixAdvertisements,omitempty"`
	ListenPort               uint16                `json:"listenPort,omitempty"`
	NodeMeshPassword         *BGPPassword          `json:"nodeMeshPassword,omitempty"`
	NodeMeshMaxRestartTime   *Duration             `json:"nodeMeshMaxRestartTime,omitempty"`
	BindMode                 string                `json:"bindMode,omitempty"` // None or NodeIP
	IgnoredInterfaces        []string              `json:"ignoredInterfaces,omitempty"`
	LocalWorkloadPeeringIPV4 string                `json:"localWorkloadPeeringIPV4,omitempty"`
	LocalWorkloadPeeringIPV6 string                `json:"localWorkloadPeeringIPV6,omitempty"`
	ProgramClusterRoutes     string                `json:"programClusterRoutes,omitempty"`
	NodeMeshKeepaliveTime    *Duration             `json:"nodeMeshKeepaliveTime,omitempty"`
	// IPv4NormalRoutePriority and IPv6NormalRoutePriority are the metric
	// of the BGP-learned routes the agent installs (unset: the kernel's
	// default metric).
	IPv4NormalRoutePriority *int32 `json:"ipv4NormalRoutePriority,omitempty"`
	IPv6NormalRoutePriority *int32 `json:"ipv6NormalRoutePriority,omitempty"`
}

// maxRoutePriority is the largest route priority Calico accepts.
const maxRoutePriority = 2147483646

// ServiceIPBlock is one CIDR of service addresses to advertise.
type ServiceIPBlock struct {
	CIDR string `json:"cidr,omitempty"`
}

// Community names a BGP community value ("aa:nn" or large "aa:nn:mm").
type Community struct {
	Name  string `json:"name,omitempty"`
	Value string `json:"value,omitempty"`
}

// PrefixAdvertisement attaches communities (names or values) to a CIDR.
type PrefixAdvertisement struct {
	CIDR        string   `json:"cidr,omitempty"`
	Communities []string `json:"communities,omitempty"`
}

func init() {
	register(KindInfo{
		Kind: "BGPPeer", Plural: "bgppeers",
		Aliases: []string{"bgppeer", "bgpp", "bgpps", "bp", "bps"},
		New:     func() Resource { return &BGPPeer{} },
	})
	register(KindInfo{
		Kind: "BGPConfiguration", Plural: "bgpconfigurations",
		Aliases: []string{"bgpconfiguration", "bgpconfig", "bgpconfigs"},
		New:     func() Resource { return &BGPConfiguration{} },
	})
}

func (p *BGPPeer) GetObjectMeta() *ObjectMeta          { return &p.Metadata }
func (c *BGPConfiguration) GetObjectMeta() *ObjectMeta { return &c.Metadata }

// Default does nothing: Calico fills no BGPPeer fields on write.
func (p *BGPPeer) Default() {}

// Default does nothing: unset fields mean the documented defaults.
func (c *BGPConfiguration) Default() {}

// Validate checks the peer address and that node/nodeSelector and
// peerIP+asNumber/peerSelector are not mixed, as Calico does.
func (p *BGPPeer) Validate() error {
	var f fieldErrs
	f.unsupported(p)
	f.meta(&p.Metadata, false, subdomainProblem)
	s := &p.Spec
	f.name("spec.node", s.Node)
	f.selector("spec.nodeSelector", s.NodeSelector)
	f.selector("spec.peerSelector", s.PeerSelector)
	f.selector("spec.localWorkloadSelector", s.LocalWorkloadSelector)
	if s.Node != "" && s.NodeSelector != "" {
		f.add("spec.node", s.Node, "must be empty when nodeSelector is set")
	}
	if s.PeerSelector != "" {
		if s.PeerIP != "" {
			f.add("spec.peerIP", s.PeerIP, "must be empty when peerSelector is set")
		}
		if s.ASNumber != 0 {
			f.add("spec.asNumber", s.ASNumber.String(), "must be empty when peerSelector is set")
		}
	}
	if s.LocalWorkloadSelector != "" {
		if s.ASNumber == 0 {
			f.add("spec.asNumber", "", "is required when localWorkloadSelector is set")
		}
		if s.PeerIP != "" || s.PeerSelector != "" {
			f.add("spec.localWorkloadSelector", s.LocalWorkloadSelector, "cannot be combined with peerIP or peerSelector")
		}
	}
	if s.PeerIP != "" {
		if _, _, err := ParsePeerIP(s.PeerIP); err != nil {
			f.add("spec.peerIP", s.PeerIP, "is not a valid peer address: want <IP>, <IPv4>:<port> or [<IPv6>]:<port>")
		}
	}
	if s.ReachableBy != "" {
		f.ip("spec.reachableBy", s.ReachableBy, 0)
		if s.PeerIP == "" {
			f.add("spec.reachableBy", s.ReachableBy, "requires peerIP")
		}
	}
	f.oneOf("spec.sourceAddress", s.SourceAddress, "UseNodeIP", "None")
	f.oneOf("spec.failureDetectionMode", s.FailureDetectionMode, "None", "BFDIfDirectlyConnected")
	f.oneOf("spec.restartMode", s.RestartMode, "GracefulRestart", "LongLivedGracefulRestart")
	f.oneOf("spec.reversePeering", s.ReversePeering, ReversePeeringAuto, ReversePeeringManual)
	if s.LocalASNumber != nil && *s.LocalASNumber == 0 {
		f.add("spec.localASNumber", "0", "is not a valid AS number")
	}
	if s.KeepOriginalNextHop && s.NextHopMode != "" {
		f.add("spec.keepOriginalNextHop", "", "must not be set together with nextHopMode")
	}
	f.password("spec.password", s.Password)
	for _, d := range []struct {
		field string
		d     *Duration
	}{{"spec.maxRestartTime", s.MaxRestartTime}, {"spec.keepaliveTime", s.KeepaliveTime}} {
		if d.d != nil && d.d.Duration < 0 {
			f.add(d.field, d.d.String(), "must not be negative")
		}
	}
	for i, n := range s.Filters {
		f.name(idx("spec.filters", i), n)
	}
	return f.join()
}

func (f *fieldErrs) password(path string, p *BGPPassword) {
	if p == nil || p.SecretKeyRef == nil {
		return
	}
	if p.SecretKeyRef.Name == "" {
		f.add(path+".secretKeyRef.name", "", "is required")
	}
	if p.SecretKeyRef.Key == "" {
		f.add(path+".secretKeyRef.key", "", "is required")
	}
}

// Validate checks levels, CIDRs, communities and the mesh-only settings.
func (c *BGPConfiguration) Validate() error {
	var f fieldErrs
	f.unsupported(c)
	f.meta(&c.Metadata, false, subdomainProblem)
	s := &c.Spec
	f.oneOf("spec.logSeverityScreen", s.LogSeverityScreen, logLevels...)
	for _, b := range []struct {
		path   string
		blocks []ServiceIPBlock
	}{
		{"spec.serviceLoadBalancerIPs", s.ServiceLoadBalancerIPs},
		{"spec.serviceExternalIPs", s.ServiceExternalIPs},
		{"spec.serviceClusterIPs", s.ServiceClusterIPs},
	} {
		for i, blk := range b.blocks {
			f.cidr(idx(b.path, i)+".cidr", blk.CIDR, 0, true)
		}
	}
	names := map[string]bool{}
	for i, cm := range s.Communities {
		p := idx("spec.communities", i)
		if cm.Name == "" {
			f.add(p+".name", "", "is required")
		}
		f.name(p+".name", cm.Name)
		names[cm.Name] = true
		if msg := communityProblem(cm.Value); msg != "" {
			f.add(p+".value", cm.Value, msg)
		}
	}
	if len(s.Communities) > 0 && len(s.PrefixAdvertisements) == 0 {
		f.add("spec.communities", "", "are defined but no prefixAdvertisement uses them")
	}
	for i, pa := range s.PrefixAdvertisements {
		p := idx("spec.prefixAdvertisements", i)
		f.cidr(p+".cidr", pa.CIDR, 0, true)
		for j, v := range pa.Communities {
			if !names[v] && communityProblem(v) != "" {
				f.add(idx(p+".communities", j), v, "is neither a defined community name nor a community value")
			}
		}
	}
	meshOff := s.NodeToNodeMeshEnabled != nil && !*s.NodeToNodeMeshEnabled
	if meshOff && s.NodeMeshPassword != nil {
		f.add("spec.nodeMeshPassword", "", "cannot be set when nodeToNodeMeshEnabled is false")
	}
	if meshOff && s.NodeMeshMaxRestartTime != nil {
		f.add("spec.nodeMeshMaxRestartTime", s.NodeMeshMaxRestartTime.String(), "cannot be set when nodeToNodeMeshEnabled is false")
	}
	f.password("spec.nodeMeshPassword", s.NodeMeshPassword)
	f.oneOf("spec.bindMode", s.BindMode, "None", "NodeIP")
	for i, in := range s.IgnoredInterfaces {
		if in == "*" || !ignoredIfaceRe().MatchString(in) {
			f.add(idx("spec.ignoredInterfaces", i), in, "is not a valid interface name or pattern")
		}
	}
	f.ip("spec.localWorkloadPeeringIPV4", s.LocalWorkloadPeeringIPV4, 4)
	f.ip("spec.localWorkloadPeeringIPV6", s.LocalWorkloadPeeringIPV6, 6)
	f.oneOf("spec.programClusterRoutes", s.ProgramClusterRoutes, "Enabled", "Disabled")
	for _, pr := range []struct {
		field string
		v     *int32
	}{{"spec.ipv4NormalRoutePriority", s.IPv4NormalRoutePriority}, {"spec.ipv6NormalRoutePriority", s.IPv6NormalRoutePriority}} {
		if pr.v != nil && (*pr.v < 1 || *pr.v > maxRoutePriority) {
			f.add(pr.field, strconv.Itoa(int(*pr.v)), "must be between 1 and 2147483646")
		}
	}
	if c.Metadata.Name != "default" {
		c.defaultOnly(&f)
	}
	return f.join()
}

// defaultOnly refuses on a node.<name> object the fields Calico allows only
// on "default", with Calico's reasons.
func (c *BGPConfiguration) defaultOnly(f *fieldErrs) {
	s := &c.Spec
	if s.NodeToNodeMeshEnabled != nil {
		f.add("spec.nodeToNodeMeshEnabled", "", "Cannot set nodeToNodeMeshEnabled on a non default BGP Configuration.")
	}
	if s.ASNumber != nil {
		f.add("spec.asNumber", "", "Cannot set ASNumber on a non default BGP Configuration.")
	}
	if len(s.ServiceExternalIPs) > 0 {
		f.add("spec.serviceExternalIPs", "", "Cannot set ServiceExternalIPs on a non default BGP Configuration.")
	}
	if len(s.ServiceClusterIPs) > 0 {
		f.add("spec.serviceClusterIPs", "", "Cannot set ServiceClusterIPs on a non default BGP Configuration.")
	}
	// Calico's confd reads programClusterRoutes from "default" only and
	// ignores it here: refused rather than stored and ignored.
	if s.ProgramClusterRoutes != "" {
		f.add("spec.programClusterRoutes", s.ProgramClusterRoutes, "is read from the default BGP Configuration only; set it there")
	}
}

// communityProblem checks "aa:nn" (16-bit parts) or "aa:nn:mm" (32-bit parts).
func communityProblem(v string) string {
	parts := strings.Split(v, ":")
	bits := 16
	switch len(parts) {
	case 2:
	case 3:
		bits = 32
	default:
		return "must be aa:nn or aa:nn:mm"
	}
	for _, p := range parts {
		if _, err := strconv.ParseUint(p, 10, bits); err != nil || p == "" || p[0] == '+' {
			return "must be aa:nn (16-bit numbers) or aa:nn:mm (32-bit numbers)"
		}
	}
	return ""
}
