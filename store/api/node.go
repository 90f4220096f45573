package api

import "encoding/base64"

// Node is one host running the agent: its BGP identity and tunnel addresses.
type Node struct {
	TypeMeta
	Metadata ObjectMeta `json:"metadata"`
	Spec     NodeSpec   `json:"spec"`
	// Status is always written, as "status":{} when empty, like Calico.
	Status NodeStatus `json:"status"`
}

// NodeSpec is projectcalico.org/v3 Node.spec.
type NodeSpec struct {
	BGP                  *NodeBGPSpec       `json:"bgp,omitempty"`
	IPv4VXLANTunnelAddr  string             `json:"ipv4VXLANTunnelAddr,omitempty"`
	VXLANTunnelMACAddr   string             `json:"vxlanTunnelMACAddr,omitempty"`
	IPv6VXLANTunnelAddr  string             `json:"ipv6VXLANTunnelAddr,omitempty"`
	VXLANTunnelMACAddrV6 string             `json:"vxlanTunnelMACAddrV6,omitempty"`
	OrchRefs             []OrchRef          `json:"orchRefs,omitempty"`
	Wireguard            *NodeWireguardSpec `json:"wireguard,omitempty"`
	Addresses            []NodeAddress      `json:"addresses,omitempty"`
	Interfaces           []NodeInterface    `json:"interfaces,omitempty"`
}

// NodeBGPSpec is the node's BGP identity. ASNumber nil means the global default.
type NodeBGPSpec struct {
	ASNumber                *ASNumber `json:"asNumber,omitempty"`
	IPv4Address             string    `json:"ipv4Address,omitempty"`
	IPv6Address             string    `json:"ipv6Address,omitempty"`
	IPv4IPIPTunnelAddr      string    `json:"ipv4IPIPTunnelAddr,omitempty"`
	RouteReflectorClusterID string    `json:"routeReflectorClusterID,omitempty"`
}

// OrchRef ties the node to its name in an orchestrator.
type OrchRef struct {
	NodeName     string `json:"nodeName,omitempty"`
	Orchestrator string `json:"orchestrator"`
}

// NodeAddress is an address the node can be reached at.
type NodeAddress struct {
	Address string `json:"address"`
	Type    string `json:"type,omitempty"` // CalicoNodeIP, InternalIP or ExternalIP
}

// NodeInterface is a host interface and its addresses.
type NodeInterface struct {
	Name      string   `json:"name,omitempty"`
	Addresses []string `json:"addresses,omitempty"`
}

// NodeWireguardSpec holds the node's WireGuard interface addresses.
type NodeWireguardSpec struct {
	InterfaceIPv4Address string `json:"interfaceIPv4Address,omitempty"`
	InterfaceIPv6Address string `json:"interfaceIPv6Address,omitempty"`
}

// NodeStatus is what the node reports about itself.
type NodeStatus struct {
	WireguardPublicKey   string   `json:"wireguardPublicKey,omitempty"`
	WireguardPublicKeyV6 string   `json:"wireguardPublicKeyV6,omitempty"`
	PodCIDRs             []string `json:"podCIDRs,omitempty"`
}

func init() {
	register(KindInfo{
		Kind: "Node", Plural: "nodes",
		Aliases: []string{"node", "no", "nos"},
		New:     func() Resource { return &Node{} },
	})
}

func (n *Node) GetObjectMeta() *ObjectMeta { return &n.Metadata }

// Default does nothing: Calico fills no Node fields on write.
func (n *Node) Default() {}

// Validate checks addresses, tunnel addresses and MACs.
func (n *Node) Validate() error {
	var f fieldErrs
	f.unsupported(n)
	f.meta(&n.Metadata, false, subdomainProblem)
	s := &n.Spec
	if b := s.BGP; b != nil {
		if *b == (NodeBGPSpec{}) {
			f.add("spec.bgp", "", "must not be empty when present")
		}
		if b.IPv4Address != "" {
			f.cidr("spec.bgp.ipv4Address", b.IPv4Address, 4, false)
		}
		if b.IPv6Address != "" {
			f.cidr("spec.bgp.ipv6Address", b.IPv6Address, 6, false)
		}
		f.ip("spec.bgp.ipv4IPIPTunnelAddr", b.IPv4IPIPTunnelAddr, 4)
		f.ip("spec.bgp.routeReflectorClusterID", b.RouteReflectorClusterID, 4)
	}
	f.ip("spec.ipv4VXLANTunnelAddr", s.IPv4VXLANTunnelAddr, 4)
	f.ip("spec.ipv6VXLANTunnelAddr", s.IPv6VXLANTunnelAddr, 6)
	f.mac("spec.vxlanTunnelMACAddr", s.VXLANTunnelMACAddr)
	f.mac("spec.vxlanTunnelMACAddrV6", s.VXLANTunnelMACAddrV6)
	if w := s.Wireguard; w != nil {
		f.ip("spec.wireguard.interfaceIPv4Address", w.InterfaceIPv4Address, 4)
		f.ip("spec.wireguard.interfaceIPv6Address", w.InterfaceIPv6Address, 6)
	}
	for i, o := range s.OrchRefs {
		if o.Orchestrator == "" {
			f.add(idx("spec.orchRefs", i)+".orchestrator", "", "is required")
		}
	}
	for i, a := range s.Addresses {
		p := idx("spec.addresses", i)
		f.cidr(p+".address", a.Address, 0, false)
		f.oneOf(p+".type", a.Type, "CalicoNodeIP", "InternalIP", "ExternalIP")
	}
	for i, in := range s.Interfaces {
		for j, a := range in.Addresses {
			f.cidr(idx(idx("spec.interfaces", i)+".addresses", j), a, 0, false)
		}
	}
	for _, fk := range [][2]string{
		{"status.wireguardPublicKey", n.Status.WireguardPublicKey},
		{"status.wireguardPublicKeyV6", n.Status.WireguardPublicKeyV6},
	} {
		field, key := fk[0], fk[1]
		if b, err := base64.StdEncoding.DecodeString(key); key != "" && (err != nil || len(b) != 32) {
			f.add(field, key, "is not a base64 WireGuard key")
		}
	}
	for i, c := range n.Status.PodCIDRs {
		f.cidr(idx("status.podCIDRs", i), c, 0, false)
	}
	return f.join()
}
