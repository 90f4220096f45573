package api

import (
	"net/netip"
	"strconv"
)

// WorkloadEndpoint is a pod's (or container's) interface on a node.
type WorkloadEndpoint struct {
	TypeMeta
	Metadata ObjectMeta           `json:"metadata"`
	Spec     WorkloadEndpointSpec `json:"spec"`
}

// WorkloadEndpointSpec is projectcalico.org/v3 WorkloadEndpoint.spec.
type WorkloadEndpointSpec struct {
	Orchestrator               string                 `json:"orchestrator,omitempty"`
	Workload                   string                 `json:"workload,omitempty"`
	Node                       string                 `json:"node,omitempty"`
	ContainerID                string                 `json:"containerID,omitempty"`
	Pod                        string                 `json:"pod,omitempty"`
	Endpoint                   string                 `json:"endpoint,omitempty"`
	ServiceAccountName         string                 `json:"serviceAccountName,omitempty"`
	IPNetworks                 []string               `json:"ipNetworks,omitempty"`
	IPNATs                     []IPNAT                `json:"ipNATs,omitempty"`
	IPv4Gateway                string                 `json:"ipv4Gateway,omitempty"`
	IPv6Gateway                string                 `json:"ipv6Gateway,omitempty"`
	Profiles                   []string               `json:"profiles,omitempty"`
	InterfaceName              string                 `json:"interfaceName,omitempty"`
	MAC                        string                 `json:"mac,omitempty"`
	Ports                      []WorkloadEndpointPort `json:"ports,omitempty"`
	AllowSpoofedSourcePrefixes []string               `json:"allowSpoofedSourcePrefixes,omitempty"`
	QoSControls                *QoSControls           `json:"qosControls,omitempty"`
}

// IPNAT is a 1:1 NAT from an external address to one of the endpoint's.
type IPNAT struct {
	InternalIP string `json:"internalIP"`
	ExternalIP string `json:"externalIP"`
	Source     string `json:"source,omitempty"`
}

// WorkloadEndpointPort is a named (or host-mapped) port of a workload.
type WorkloadEndpointPort struct {
	Name     string   `json:"name"`
	Protocol Protocol `json:"protocol"`
	Port     uint16   `json:"port"`
	HostPort uint16   `json:"hostPort"`
	HostIP   string   `json:"hostIP"`
}

// Labels Calico adds to every workload endpoint on write.
const (
	LabelNamespace      = "projectcalico.org/namespace"
	LabelOrchestrator   = "projectcalico.org/orchestrator"
	LabelServiceAccount = "projectcalico.org/serviceaccount"
)

func init() {
	register(KindInfo{
		Kind: "WorkloadEndpoint", Plural: "workloadendpoints", Namespaced: true,
		Aliases: []string{"workloadendpoint", "wep", "weps"},
		New:     func() Resource { return &WorkloadEndpoint{} },
	})
	register(KindInfo{
		Kind: "HostEndpoint", Plural: "hostendpoints",
		Aliases: []string{"hostendpoint", "hep", "heps"},
		New:     func() Resource { return &HostEndpoint{} },
	})
}

func (w *WorkloadEndpoint) GetObjectMeta() *ObjectMeta { return &w.Metadata }

// Default adds the labels Calico stores with each endpoint: its namespace,
// orchestrator and (when set) service account.
func (w *WorkloadEndpoint) Default() {
	set := func(k, v string) {
		if v == "" {
			return
		}
		if w.Metadata.Labels == nil {
			w.Metadata.Labels = map[string]string{}
		}
		w.Metadata.Labels[k] = v
	}
	set(LabelNamespace, w.Metadata.Namespace)
	set(LabelOrchestrator, w.Spec.Orchestrator)
	set(LabelServiceAccount, w.Spec.ServiceAccountName)
}

// Validate checks names, single-address networks, gateways, NATs, the
// interface name, MAC, ports and QoS controls.
func (w *WorkloadEndpoint) Validate() error {
	var f fieldErrs
	f.meta(&w.Metadata, true, subdomainProblem)
	s := &w.Spec
	f.name("spec.orchestrator", s.Orchestrator)
	f.name("spec.workload", s.Workload)
	f.name("spec.node", s.Node)
	f.name("spec.pod", s.Pod)
	f.name("spec.endpoint", s.Endpoint)
	f.name("spec.serviceAccountName", s.ServiceAccountName)
	if s.ContainerID != "" && !containerIDRe().MatchString(s.ContainerID) {
		f.add("spec.containerID", s.ContainerID, "must be alphanumerics and '-', starting and ending with an alphanumeric")
	}
	var nets []netip.Prefix
	for i, n := range s.IPNetworks {
		p, ok := f.cidr(idx("spec.ipNetworks", i), n, 0, false)
		if ok && p.Bits() != p.Addr().BitLen() {
			f.add(idx("spec.ipNetworks", i), n, "must be a single address (/32 or /128)")
		}
		if ok {
			nets = append(nets, p)
		}
	}
	f.ip("spec.ipv4Gateway", s.IPv4Gateway, 4)
	f.ip("spec.ipv6Gateway", s.IPv6Gateway, 6)
	for i, nat := range s.IPNATs {
		p := idx("spec.ipNATs", i)
		in, err1 := netip.ParseAddr(nat.InternalIP)
		ex, err2 := netip.ParseAddr(nat.ExternalIP)
		if err1 != nil {
			f.add(p+".internalIP", nat.InternalIP, "is not a valid address")
		}
		if err2 != nil {
			f.add(p+".externalIP", nat.ExternalIP, "is not a valid address")
		}
		if err1 != nil || err2 != nil {
			continue
		}
		if in.Unmap().Is4() != ex.Unmap().Is4() {
			f.add(p+".externalIP", nat.ExternalIP, "is not the same IP version as internalIP")
		}
		if !containsAddr(nets, in.Unmap()) {
			f.add(p+".internalIP", nat.InternalIP, "is not one of the endpoint's ipNetworks")
		}
	}
	for i, pr := range s.Profiles {
		if p := subdomainProblem(pr); p != "" {
			f.add(idx("spec.profiles", i), pr, p)
		}
	}
	if s.InterfaceName == "" {
		f.add("spec.interfaceName", "", "is required")
	}
	f.iface("spec.interfaceName", s.InterfaceName, false)
	f.mac("spec.mac", s.MAC)
	for i, pt := range s.Ports {
		p := idx("spec.ports", i)
		if pt.Name != "" {
			if msg := portNameProblem(pt.Name); msg != "" {
				f.add(p+".name", pt.Name, msg)
			}
		} else if pt.HostPort == 0 {
			f.add(p+".name", "", "is required when hostPort is not set")
		}
		if !pt.Protocol.SupportsPorts() {
			f.add(p+".protocol", pt.Protocol.String(), "must be a protocol with ports (TCP, UDP, SCTP, UDPLite)")
		}
		if pt.Port == 0 {
			f.add(p+".port", "0", "must be 1-65535")
		}
		f.ip(p+".hostIP", pt.HostIP, 0)
	}
	for i, n := range s.AllowSpoofedSourcePrefixes {
		f.cidr(idx("spec.allowSpoofedSourcePrefixes", i), n, 0, false)
	}
	f.qos("spec.qosControls", s.QoSControls)
	f.unsupported(w)
	return f.join()
}

func containsAddr(nets []netip.Prefix, a netip.Addr) bool {
	for _, n := range nets {
		if n.Masked().Contains(a) {
			return true
		}
	}
	return false
}

// HostEndpoint is a host interface (or set of host addresses) that policy
// applies to.
type HostEndpoint struct {
	TypeMeta
	Metadata ObjectMeta       `json:"metadata"`
	Spec     HostEndpointSpec `json:"spec"`
}

// HostEndpointSpec is projectcalico.org/v3 HostEndpoint.spec.
type HostEndpointSpec struct {
	Node          string         `json:"node,omitempty"`
	InterfaceName string         `json:"interfaceName,omitempty"` // "*" = all host interfaces
	ExpectedIPs   []string       `json:"expectedIPs,omitempty"`
	Profiles      []string       `json:"profiles,omitempty"`
	Ports         []EndpointPort `json:"ports,omitempty"`
}

// EndpointPort is a named port of a host endpoint.
type EndpointPort struct {
	Name     string   `json:"name"`
	Protocol Protocol `json:"protocol"`
	Port     uint16   `json:"port"`
}

func (h *HostEndpoint) GetObjectMeta() *ObjectMeta { return &h.Metadata }

// Default does nothing: Calico fills no HostEndpoint fields on write.
func (h *HostEndpoint) Default() {}

// Validate checks the node, interface or expected IPs, profiles and ports.
func (h *HostEndpoint) Validate() error {
	var f fieldErrs
	f.unsupported(h)
	f.meta(&h.Metadata, false, subdomainProblem)
	s := &h.Spec
	if s.Node == "" {
		f.add("spec.node", "", "is required")
	}
	f.name("spec.node", s.Node)
	if s.InterfaceName == "" && len(s.ExpectedIPs) == 0 {
		f.add("spec.interfaceName", "", "is required unless spec.expectedIPs is set")
	}
	f.iface("spec.interfaceName", s.InterfaceName, true)
	for i, ip := range s.ExpectedIPs {
		if ip == "" {
			f.add(idx("spec.expectedIPs", i), "", "is empty")
		}
		f.ip(idx("spec.expectedIPs", i), ip, 0)
	}
	for i, pr := range s.Profiles {
		if p := subdomainProblem(pr); p != "" {
			f.add(idx("spec.profiles", i), pr, p)
		}
	}
	for i, pt := range s.Ports {
		p := idx("spec.ports", i)
		if msg := portNameProblem(pt.Name); msg != "" {
			f.add(p+".name", pt.Name, msg)
		}
		if !pt.Protocol.SupportsPorts() {
			f.add(p+".protocol", pt.Protocol.String(), "must be a protocol with ports (TCP, UDP, SCTP, UDPLite)")
		}
		if pt.Port == 0 {
			f.add(p+".port", strconv.Itoa(int(pt.Port)), "must be 1-65535")
		}
	}
	return f.join()
}
