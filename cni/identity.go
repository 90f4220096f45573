package cni

import (
	"crypto/sha1"
	"encoding/hex"
	"strings"
)

// Orchestrator names as Calico writes them.
const (
	OrchestratorCNI = "cni"
	OrchestratorK8s = "k8s"
)

// identity is who a pod is in the datastore and on the host.
type identity struct {
	orchestrator string
	namespace    string // WorkloadEndpoint namespace
	pod          string // k8s pod name ("" for plain CNI)
	containerID  string
	ifName       string
	endpoint     string // WorkloadEndpoint name
	// hostVeth is the preferred host interface name until ADD chooses
	// (see HostIface), then the chosen one.
	hostVeth string
}

// hostIface is the workload's request for its host interface name.
func (id identity) hostIface(claims ClaimsSource) HostIface {
	return HostIface{Preferred: id.hostVeth, Self: EndpointKey(id.namespace, id.endpoint), LoadClaims: claims}
}

// escape doubles '-' in a name part, as Calico does when joining parts with '-'.
func escape(s string) string { return strings.ReplaceAll(s, "-", "--") }

// newIdentity derives names the way Calico does: plain CNI pods are
// <node>-cni-<containerID>-<ifname> in namespace default, host veth
// "cali"+containerID[:11]; Kubernetes pods are <node>-k8s-<pod>-<ifname> in
// the pod's namespace, host veth "cali"+sha1("<ns>.<pod>")[:11]. The host
// veth is the first choice; HostIface decides the name taken.
func newIdentity(node, containerID, ifName string, a Args) identity {
	id := identity{containerID: containerID, ifName: ifName}
	if a.PodName != "" && a.PodNamespace != "" {
		id.orchestrator = OrchestratorK8s
		id.namespace, id.pod = a.PodNamespace, a.PodName
		id.endpoint = escape(node) + "-k8s-" + escape(a.PodName) + "-" + escape(ifName)
		sum := sha1.Sum([]byte(a.PodNamespace + "." + a.PodName))
		id.hostVeth = "cali" + hex.EncodeToString(sum[:])[:11]
		return id
	}
	id.orchestrator = OrchestratorCNI
	id.namespace = "default"
	id.endpoint = escape(node) + "-cni-" + escape(containerID) + "-" + escape(ifName)
	short := containerID
	if ifName != "eth0" {
		// A second interface of the same container needs its own name.
		sum := sha1.Sum([]byte(containerID + "." + ifName))
		short = hex.EncodeToString(sum[:])
	}
	if len(short) > 11 {
		short = short[:11]
	}
	id.hostVeth = "cali" + short
	return id
}
