// Package k8s turns the Kubernetes objects the agent reads (namespaces,
// service accounts, pods, networking.k8s.io/v1 NetworkPolicies) into the
// Calico objects it stores, with the semantics Calico's kube-controllers
// give them: namespaces and service accounts become label-carrying profiles
// ("kns.<ns>", "ksa.<ns>.<sa>"), pods get Calico's extra labels, and
// NetworkPolicies become namespaced Calico policies "knp.default.<name>".
//
// The Kubernetes types here are minimal copies with Kubernetes' JSON field
// names, not k8s.io/api: the generated packages register protobuf types at
// init and would slow every start of this one binary (the CNI plugin runs
// once per pod). Client (client.go) reads them from the API with client-go's
// dynamic client, through JSON; the translation is pure: no I/O, no
// goroutines.
package k8s

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// TypeMeta is an object's kind and apiVersion.
type TypeMeta struct {
	Kind       string `json:"kind,omitempty"`
	APIVersion string `json:"apiVersion,omitempty"`
}

// ObjectMeta is the part of Kubernetes object metadata the agent uses.
type ObjectMeta struct {
	Name              string            `json:"name,omitempty"`
	Namespace         string            `json:"namespace,omitempty"`
	UID               string            `json:"uid,omitempty"`
	ResourceVersion   string            `json:"resourceVersion,omitempty"`
	Labels            map[string]string `json:"labels,omitempty"`
	Annotations       map[string]string `json:"annotations,omitempty"`
	DeletionTimestamp *time.Time        `json:"deletionTimestamp,omitempty"`
}

// Namespace is a core/v1 Namespace.
type Namespace struct {
	TypeMeta
	Metadata ObjectMeta `json:"metadata"`
}

// ServiceAccount is a core/v1 ServiceAccount.
type ServiceAccount struct {
	TypeMeta
	Metadata ObjectMeta `json:"metadata"`
}

// Pod is a core/v1 Pod, reduced to networking.
type Pod struct {
	TypeMeta
	Metadata ObjectMeta `json:"metadata"`
	Spec     PodSpec    `json:"spec"`
	Status   PodStatus  `json:"status"`
}

// PodSpec is the part of a pod's spec the agent uses.
type PodSpec struct {
	NodeName           string      `json:"nodeName,omitempty"`
	ServiceAccountName string      `json:"serviceAccountName,omitempty"`
	HostNetwork        bool        `json:"hostNetwork,omitempty"`
	Containers         []Container `json:"containers,omitempty"`
	InitContainers     []Container `json:"initContainers,omitempty"`
}

// Container is a container's name and ports.
type Container struct {
	Name  string          `json:"name,omitempty"`
	Ports []ContainerPort `json:"ports,omitempty"`
}

// ContainerPort is a port a container declares; a named one can be used by
// name in NetworkPolicy ports.
type ContainerPort struct {
	Name          string `json:"name,omitempty"`
	ContainerPort int32  `json:"containerPort"`
	Protocol      string `json:"protocol,omitempty"` // TCP (default), UDP or SCTP
	HostPort      int32  `json:"hostPort,omitempty"`
	HostIP        string `json:"hostIP,omitempty"`
}

// PodStatus holds the pod's phase and addresses.
type PodStatus struct {
	Phase  string  `json:"phase,omitempty"`
	PodIP  string  `json:"podIP,omitempty"`
	PodIPs []PodIP `json:"podIPs,omitempty"`
}

// PodIP is one entry of status.podIPs.
type PodIP struct {
	IP string `json:"ip"`
}

// Node is a core/v1 Node, reduced to its pod CIDRs.
type Node struct {
	TypeMeta
	Metadata ObjectMeta `json:"metadata"`
	Spec     NodeSpec   `json:"spec"`
}

// NodeSpec holds the node's pod CIDRs (podCIDRs[0] == podCIDR when set).
type NodeSpec struct {
	PodCIDR  string   `json:"podCIDR,omitempty"`
	PodCIDRs []string `json:"podCIDRs,omitempty"`
}

// NetworkPolicy is a networking.k8s.io/v1 NetworkPolicy.
type NetworkPolicy struct {
	TypeMeta
	Metadata ObjectMeta        `json:"metadata"`
	Spec     NetworkPolicySpec `json:"spec"`
}

// NetworkPolicySpec selects pods in the policy's namespace and lists what
// may reach them (ingress) and what they may reach (egress).
type NetworkPolicySpec struct {
	PodSelector LabelSelector              `json:"podSelector"`
	Ingress     []NetworkPolicyIngressRule `json:"ingress,omitempty"`
	Egress      []NetworkPolicyEgressRule  `json:"egress,omitempty"`
	PolicyTypes []string                   `json:"policyTypes,omitempty"` // "Ingress", "Egress"
}

// NetworkPolicyIngressRule allows traffic from any of From (anywhere when
// empty) to any of Ports (every port when empty).
type NetworkPolicyIngressRule struct {
	From  []NetworkPolicyPeer `json:"from,omitempty"`
	Ports []NetworkPolicyPort `json:"ports,omitempty"`
}

// NetworkPolicyEgressRule allows traffic to any of To (anywhere when
// empty) on any of Ports (every port when empty).
type NetworkPolicyEgressRule struct {
	To    []NetworkPolicyPeer `json:"to,omitempty"`
	Ports []NetworkPolicyPort `json:"ports,omitempty"`
}

// NetworkPolicyPeer is pods (by pod and/or namespace selector) or an IP
// block. A nil selector is no restriction; an empty one selects all.
type NetworkPolicyPeer struct {
	PodSelector       *LabelSelector `json:"podSelector,omitempty"`
	NamespaceSelector *LabelSelector `json:"namespaceSelector,omitempty"`
	IPBlock           *IPBlock       `json:"ipBlock,omitempty"`
}

// IPBlock is a CIDR minus the CIDRs in Except.
type IPBlock struct {
	CIDR   string   `json:"cidr"`
	Except []string `json:"except,omitempty"`
}

// NetworkPolicyPort is a protocol (TCP when nil) and optionally a port: a
// number, a container port name, or with EndPort the range Port..EndPort.
type NetworkPolicyPort struct {
	Protocol *string      `json:"protocol,omitempty"`
	Port     *IntOrString `json:"port,omitempty"`
	EndPort  *int32       `json:"endPort,omitempty"`
}

// LabelSelector is a metav1.LabelSelector: every matchLabels pair and
// every expression must hold.
type LabelSelector struct {
	MatchLabels      map[string]string          `json:"matchLabels,omitempty"`
	MatchExpressions []LabelSelectorRequirement `json:"matchExpressions,omitempty"`
}

// LabelSelectorRequirement is one matchExpressions entry.
type LabelSelectorRequirement struct {
	Key      string   `json:"key"`
	Operator string   `json:"operator"` // In, NotIn, Exists, DoesNotExist
	Values   []string `json:"values,omitempty"`
}

// Label selector operators.
const (
	OpIn           = "In"
	OpNotIn        = "NotIn"
	OpExists       = "Exists"
	OpDoesNotExist = "DoesNotExist"
)

// IntOrString is Kubernetes' intstr.IntOrString: a JSON number or string.
type IntOrString struct {
	IsString bool
	IntVal   int32
	StrVal   string
}

// FromInt is the number n.
func FromInt(n int32) IntOrString { return IntOrString{IntVal: n} }

// FromString is the string s.
func FromString(s string) IntOrString { return IntOrString{IsString: true, StrVal: s} }

// String is the string, or the number in decimal.
func (v IntOrString) String() string {
	if v.IsString {
		return v.StrVal
	}
	return strconv.Itoa(int(v.IntVal))
}

// MarshalJSON writes a number or a string.
func (v IntOrString) MarshalJSON() ([]byte, error) {
	if v.IsString {
		return json.Marshal(v.StrVal)
	}
	return json.Marshal(v.IntVal)
}

// UnmarshalJSON reads a number or a string.
func (v *IntOrString) UnmarshalJSON(b []byte) error {
	if b = bytes.TrimSpace(b); len(b) > 0 && b[0] == '"' {
		v.IsString, v.IntVal = true, 0
		return json.Unmarshal(b, &v.StrVal)
	}
	var n int32
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("int or string: %w", err)
	}
	*v = FromInt(n)
	return nil
}
