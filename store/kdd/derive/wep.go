// Package derive holds the pure conversions of Calico's derived kinds in
// Kubernetes datastore mode: a WorkloadEndpoint from a Pod and its Calico
// annotations. It reuses the k8s package's translation of pods (labels,
// profiles, ports, QoS), so it lives beside store/kdd rather than in it,
// keeping store/kdd free of client-go. No I/O.
package derive

import (
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"

	"github.com/calico-aio/calico-aio/k8s"
	"github.com/calico-aio/calico-aio/store/api"
	"github.com/calico-aio/calico-aio/store/kdd"
)

// The annotations Calico's CNI plugin patches onto a pod's status.
const (
	AnnotationContainerID = "cni.projectcalico.org/containerID"
	AnnotationPodIP       = "cni.projectcalico.org/podIP"
	AnnotationPodIPs      = "cni.projectcalico.org/podIPs"
)

// DefaultInterface is the pod interface Kubernetes pods get (CNI_IFNAME).
const DefaultInterface = "eth0"

// escape doubles '-' in a name part, as Calico does when joining parts.
func escape(s string) string { return strings.ReplaceAll(s, "-", "--") }

// WorkloadEndpointName is a pod's endpoint name: <node>-k8s-<pod>-<iface>,
// each part with '-' doubled (node1-k8s-web--1-eth0).
func WorkloadEndpointName(node, pod, iface string) string {
	return EndpointName(node, "k8s", pod, iface)
}

// EndpointName is Calico's endpoint name <node>-<orchestrator>-<workload>-<iface>,
// each part with '-' doubled.
func EndpointName(node, orchestrator, workload, iface string) string {
	return escape(node) + "-" + escape(orchestrator) + "-" + escape(workload) + "-" + escape(iface)
}

// HostVethName is a pod's host-side interface: "cali" and the first 11 hex
// digits of sha1("<namespace>.<pod>").
func HostVethName(namespace, pod string) string {
	sum := sha1.Sum([]byte(namespace + "." + pod))
	return "cali" + hex.EncodeToString(sum[:])[:11]
}

// podJSON is the part of a pod read besides k8s.Pod.
type podJSON struct {
	Metadata struct {
		CreationTimestamp string `json:"creationTimestamp"`
	} `json:"metadata"`
}

// PodToWorkloadEndpoint derives a pod's WorkloadEndpoint model, as Calico
// shows it: ok is false for a pod with no endpoint (not on a node, or
// host-networked). Addresses come from the CNI plugin's podIPs (podIP)
// annotation, else the pod's status; the uid is the pod's. The
// floatingIPs, allowedSourcePrefixes and QoS annotations are read as
// Calico's derivation reads them; hwAddr is not (it sets the pod
// interface's MAC at ADD, and Calico's endpoint here carries no MAC).
func PodToWorkloadEndpoint(pod []byte) (r kdd.Read, ok bool, err error) {
	var p k8s.Pod
	var extra podJSON
	if err := json.Unmarshal(pod, &p); err != nil {
		return r, false, fmt.Errorf("pod: %w", err)
	}
	_ = json.Unmarshal(pod, &extra)
	if p.Spec.NodeName == "" || p.Spec.HostNetwork {
		return r, false, nil
	}
	m := p.Metadata
	w := &api.WorkloadEndpoint{TypeMeta: api.TypeMeta{Kind: "WorkloadEndpoint", APIVersion: kdd.ModelAPIVersion}}
	w.Metadata = api.ObjectMeta{
		Name: WorkloadEndpointName(p.Spec.NodeName, m.Name, DefaultInterface), Namespace: m.Namespace,
		UID: m.UID, CreationTimestamp: extra.Metadata.CreationTimestamp, Labels: k8s.PodLabels(p),
	}
	w.Spec.Orchestrator = k8s.OrchestratorK8s
	w.Spec.Node = p.Spec.NodeName
	w.Spec.Pod = m.Name
	w.Spec.Endpoint = DefaultInterface
	w.Spec.ContainerID = m.Annotations[AnnotationContainerID]
	w.Spec.ServiceAccountName = p.Spec.ServiceAccountName
	w.Spec.InterfaceName = HostVethName(m.Namespace, m.Name)
	w.Spec.Profiles = k8s.PodProfiles(p)
	w.Spec.Ports = k8s.PodPorts(p)
	if w.Spec.IPNetworks, err = podNetworks(p); err != nil {
		return r, false, err
	}
	if w.Spec.IPNATs, err = podIPNATs(p, w.Spec.IPNetworks); err != nil {
		return r, false, err
	}
	if v := m.Annotations[k8s.AnnotAllowedSourcePrefixes]; v != "" {
		if w.Spec.AllowSpoofedSourcePrefixes, err = k8s.SourcePrefixes(v); err != nil {
			return r, false, fmt.Errorf("pod %s/%s: annotation %s: %w", m.Namespace, m.Name, k8s.AnnotAllowedSourcePrefixes, err)
		}
	}
	if w.Spec.QoSControls, err = k8s.PodQoS(m.Annotations); err != nil {
		return r, false, fmt.Errorf("pod %s/%s: %w", m.Namespace, m.Name, err)
	}
	model, err := api.Marshal(w)
	return kdd.Read{Kind: "WorkloadEndpoint", Namespace: m.Namespace, Name: w.Metadata.Name,
		ResourceVersion: m.ResourceVersion, UID: m.UID, Model: model}, err == nil, err
}

// podNetworks are the endpoint's ipNetworks: the podIPs annotation, else
// podIP, else the pod status's addresses as host prefixes.
func podNetworks(p k8s.Pod) ([]string, error) {
	an := p.Metadata.Annotations
	raw := an[AnnotationPodIPs]
	if raw == "" {
		raw = an[AnnotationPodIP]
	}
	var out []string
	if raw == "" {
		for _, ip := range k8s.PodIPs(p) {
			a := netip.MustParseAddr(ip) // PodIPs returns only parsed addresses
			out = append(out, netip.PrefixFrom(a, a.BitLen()).String())
		}
		return out, nil
	}
	for _, s := range strings.Split(raw, ",") {
		pfx, err := netip.ParsePrefix(strings.TrimSpace(s))
		if err != nil {
			return nil, fmt.Errorf("pod %s/%s: annotation %s: %w", p.Metadata.Namespace, p.Metadata.Name, AnnotationPodIPs, err)
		}
		out = append(out, pfx.String())
	}
	return out, nil
}

// podIPNATs are the endpoint's ipNATs, as Calico derives them: while the
// pod has addresses, each floating IP mapped to the pod's address of its
// family (one of a family the pod has no address of is left out). The
// pod's addresses must be host prefixes.
func podIPNATs(p k8s.Pod, nets []string) ([]api.IPNAT, error) {
	m := p.Metadata
	v := m.Annotations[k8s.AnnotFloatingIPs]
	if v == "" || len(nets) == 0 {
		return nil, nil
	}
	floating, err := k8s.AddrList(v)
	if err != nil {
		return nil, fmt.Errorf("pod %s/%s: annotation %s: %w", m.Namespace, m.Name, k8s.AnnotFloatingIPs, err)
	}
	addrs := make([]netip.Addr, 0, len(nets))
	for _, n := range nets {
		pfx := netip.MustParsePrefix(n) // podNetworks returns only parsed prefixes
		if !pfx.IsSingleIP() {
			return nil, fmt.Errorf("pod %s/%s: annotation %s: pod address %s is not a single address (/%d), so it cannot be a floating IP's target",
				m.Namespace, m.Name, k8s.AnnotFloatingIPs, pfx, pfx.Addr().BitLen())
		}
		addrs = append(addrs, pfx.Addr())
	}
	nats, _ := k8s.FloatingIPNATs(floating, addrs)
	return nats, nil
}
