package kdd

import (
	"encoding/json"
	"fmt"
	"maps"

	"github.com/calico-aio/calico-aio/store/api"
)

// The annotations on a Kubernetes Node that hold its Calico Node's fields
// (Calico writes them through nodes/status).
const (
	NodeIPv4Address          = "projectcalico.org/IPv4Address"
	NodeIPv6Address          = "projectcalico.org/IPv6Address"
	NodeASNumber             = "projectcalico.org/ASNumber"
	NodeRRClusterID          = "projectcalico.org/RouteReflectorClusterID"
	NodeIPv4IPIPTunnelAddr   = "projectcalico.org/IPv4IPIPTunnelAddr"
	NodeIPv4VXLANTunnelAddr  = "projectcalico.org/IPv4VXLANTunnelAddr"
	NodeVXLANTunnelMACAddr   = "projectcalico.org/VXLANTunnelMACAddr"
	NodeIPv6VXLANTunnelAddr  = "projectcalico.org/IPv6VXLANTunnelAddr"
	NodeVXLANTunnelMACAddrV6 = "projectcalico.org/VXLANTunnelMACAddrV6"
	NodeWireguardIPv4Addr    = "projectcalico.org/IPv4WireguardInterfaceAddr"
	NodeWireguardIPv6Addr    = "projectcalico.org/IPv6WireguardInterfaceAddr"
	NodeWireguardPublicKey   = "projectcalico.org/WireguardPublicKey"
	NodeWireguardPublicKeyV6 = "projectcalico.org/WireguardPublicKeyV6"
	// NodeLabels holds, as JSON, the Calico Node's labels that the
	// Kubernetes Node does not have.
	NodeLabels = "projectcalico.org/labels"
	// NodeKubeLabels is the annotation of the Calico Node (not the
	// Kubernetes one) that holds the Kubernetes Node's labels, as JSON.
	NodeKubeLabels = "projectcalico.org/kube-labels"
)

// k8sNode is the part of a core/v1 Node a Calico Node is derived from.
type k8sNode struct {
	Metadata struct {
		Name              string            `json:"name"`
		UID               string            `json:"uid"`
		ResourceVersion   string            `json:"resourceVersion"`
		CreationTimestamp string            `json:"creationTimestamp"`
		Labels            map[string]string `json:"labels"`
		Annotations       map[string]string `json:"annotations"`
	} `json:"metadata"`
	Status struct {
		Addresses []struct{ Type, Address string } `json:"addresses"`
	} `json:"status"`
}

// nodeFields are the annotations holding one string field each, with the
// field they hold.
func nodeFields(n *api.Node, bgp *api.NodeBGPSpec, wg *api.NodeWireguardSpec) map[string]*string {
	return map[string]*string{
		NodeIPv4Address: &bgp.IPv4Address, NodeIPv6Address: &bgp.IPv6Address,
		NodeRRClusterID: &bgp.RouteReflectorClusterID, NodeIPv4IPIPTunnelAddr: &bgp.IPv4IPIPTunnelAddr,
		NodeIPv4VXLANTunnelAddr: &n.Spec.IPv4VXLANTunnelAddr, NodeVXLANTunnelMACAddr: &n.Spec.VXLANTunnelMACAddr,
		NodeIPv6VXLANTunnelAddr: &n.Spec.IPv6VXLANTunnelAddr, NodeVXLANTunnelMACAddrV6: &n.Spec.VXLANTunnelMACAddrV6,
		NodeWireguardIPv4Addr: &wg.InterfaceIPv4Address, NodeWireguardIPv6Addr: &wg.InterfaceIPv6Address,
		NodeWireguardPublicKey: &n.Status.WireguardPublicKey, NodeWireguardPublicKeyV6: &n.Status.WireguardPublicKeyV6,
	}
}

// NodeFromK8s derives the Calico Node model of a Kubernetes Node (JSON):
// its uid, labels (plus the projectcalico.org/labels ones) and addresses,
// the fields held in its projectcalico.org/* annotations, and an orchRef.
func NodeFromK8s(node []byte) (Read, error) {
	var k k8sNode
	if err := json.Unmarshal(node, &k); err != nil {
		return Read{}, fmt.Errorf("kubernetes node: %w", err)
	}
	m := k.Metadata
	n := api.Node{TypeMeta: api.TypeMeta{Kind: "Node", APIVersion: ModelAPIVersion}}
	n.Metadata = api.ObjectMeta{Name: m.Name, UID: m.UID, CreationTimestamp: m.CreationTimestamp}
	kube, err := json.Marshal(orEmptyMap(m.Labels))
	if err != nil {
		return Read{}, err
	}
	n.Metadata.Annotations = map[string]string{NodeKubeLabels: string(kube)}
	n.Metadata.Labels = maps.Clone(orEmptyMap(m.Labels))
	if s, ok := m.Annotations[NodeLabels]; ok {
		var extra map[string]string
		if err := json.Unmarshal([]byte(s), &extra); err != nil {
			return Read{}, fmt.Errorf("node %s: annotation %s: %w", m.Name, NodeLabels, err)
		}
		maps.Copy(n.Metadata.Labels, extra)
	}
	var bgp api.NodeBGPSpec
	var wg api.NodeWireguardSpec
	for ann, field := range nodeFields(&n, &bgp, &wg) {
		*field = m.Annotations[ann]
	}
	if s := m.Annotations[NodeASNumber]; s != "" {
		as, err := api.ParseASNumber(s)
		if err != nil {
			return Read{}, fmt.Errorf("node %s: annotation %s: %w", m.Name, NodeASNumber, err)
		}
		bgp.ASNumber = &as
	}
	if bgp != (api.NodeBGPSpec{}) {
		n.Spec.BGP = &bgp
	}
	if wg != (api.NodeWireguardSpec{}) {
		n.Spec.Wireguard = &wg
	}
	n.Spec.Addresses = nodeAddresses(bgp, k)
	n.Spec.OrchRefs = []api.OrchRef{{NodeName: m.Name, Orchestrator: "k8s"}}
	model, err := api.Marshal(&n)
	return Read{Kind: "Node", Name: m.Name, ResourceVersion: m.ResourceVersion, UID: m.UID, Model: model}, err
}

// nodeAddresses are the Calico Node's addresses: its BGP addresses
// (CalicoNodeIP), then the Kubernetes Node's internal and external ones.
func nodeAddresses(bgp api.NodeBGPSpec, k k8sNode) []api.NodeAddress {
	var out []api.NodeAddress
	for _, a := range []string{bgp.IPv4Address, bgp.IPv6Address} {
		if a != "" {
			out = append(out, api.NodeAddress{Address: a, Type: "CalicoNodeIP"})
		}
	}
	for _, a := range k.Status.Addresses {
		if a.Type == "InternalIP" || a.Type == "ExternalIP" {
			out = append(out, api.NodeAddress{Address: a.Address, Type: a.Type})
		}
	}
	return out
}

// NodeAnnotationKeys are every annotation NodeAnnotations may set: a write
// of a Calico Node replaces these on the Kubernetes Node.
func NodeAnnotationKeys() []string {
	var n api.Node
	keys := []string{NodeASNumber, NodeLabels}
	for k := range nodeFields(&n, &api.NodeBGPSpec{}, &api.NodeWireguardSpec{}) {
		keys = append(keys, k)
	}
	return keys
}

// NodeAnnotations are the annotations a write of a Calico Node (model
// JSON) puts on its Kubernetes Node. The labels the Kubernetes Node already
// has (the model's projectcalico.org/kube-labels) are not repeated. What a
// Kubernetes Node cannot hold is refused by name: interfaces, and fields
// our types do not model.
func NodeAnnotations(model []byte) (map[string]string, error) {
	r, err := api.Decode(model)
	if err != nil {
		return nil, err
	}
	n, ok := r.(*api.Node)
	if !ok {
		return nil, fmt.Errorf("kind %s is not a Node", r.GetTypeMeta().Kind)
	}
	if len(n.Spec.Interfaces) > 0 {
		return nil, fmt.Errorf("node %s: spec.interfaces: not stored in the Kubernetes datastore", n.Metadata.Name)
	}
	if api.HasUnmodelled(n) {
		return nil, fmt.Errorf("node %s: fields outside projectcalico.org/v3 Node cannot be stored on a Kubernetes Node", n.Metadata.Name)
	}
	bgp, wg := api.NodeBGPSpec{}, api.NodeWireguardSpec{}
	if n.Spec.BGP != nil {
		bgp = *n.Spec.BGP
	}
	if n.Spec.Wireguard != nil {
		wg = *n.Spec.Wireguard
	}
	out := map[string]string{}
	for ann, field := range nodeFields(n, &bgp, &wg) {
		if *field != "" {
			out[ann] = *field
		}
	}
	if bgp.ASNumber != nil {
		out[NodeASNumber] = bgp.ASNumber.String()
	}
	labels, err := calicoOnlyLabels(n.Metadata)
	if err != nil {
		return nil, err
	}
	if len(labels) > 0 {
		b, _ := json.Marshal(labels)
		out[NodeLabels] = string(b)
	}
	return out, nil
}

// calicoOnlyLabels are a Calico Node's labels the Kubernetes Node does not
// have with the same value.
func calicoOnlyLabels(m api.ObjectMeta) (map[string]string, error) {
	kube := map[string]string{}
	if s, ok := m.Annotations[NodeKubeLabels]; ok {
		if err := json.Unmarshal([]byte(s), &kube); err != nil {
			return nil, fmt.Errorf("node %s: annotation %s: %w", m.Name, NodeKubeLabels, err)
		}
	}
	out := map[string]string{}
	for k, v := range m.Labels {
		if kv, ok := kube[k]; !ok || kv != v {
			out[k] = v
		}
	}
	return out, nil
}

func orEmptyMap(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}
