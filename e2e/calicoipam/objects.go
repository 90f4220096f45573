package calicoipam

import (
	"encoding/json"
	"net/netip"
	"strings"

	"github.com/calico-aio/calico-aio/store/kdd"
)

// The custom resources as Calico v3.32.1 writes them (testdata/objects.json
// and the write bodies of testdata/api-calls.json), field for field.

const (
	apiVersion       = "crd.projectcalico.org/v1"
	metadataAnno     = "projectcalico.org/metadata"
	stateConfirmed   = "confirmed"
	statePending     = "pending"
	affinityTypeHost = "host"
)

// objectMeta is what the double reads of an object's metadata and writes
// back. CreationTimestamp is always written as null, as Calico does.
type objectMeta struct {
	Name              string            `json:"name"`
	Namespace         string            `json:"namespace,omitempty"`
	UID               string            `json:"uid,omitempty"`
	ResourceVersion   string            `json:"resourceVersion,omitempty"`
	CreationTimestamp *string           `json:"creationTimestamp"`
	Labels            map[string]string `json:"labels,omitempty"`
	Annotations       map[string]string `json:"annotations,omitempty"`
}

// ipamMeta is the metadata Calico writes on an IPAM object: the name, the
// labels, and the projectcalico.org/metadata annotation carrying
// {"creationTimestamp":null} and those labels. uid is sent only where
// Calico sends it (a handle update).
func ipamMeta(name string, labels map[string]string, resourceVersion, uid string) objectMeta {
	v3 := struct {
		CreationTimestamp *string           `json:"creationTimestamp"`
		Labels            map[string]string `json:"labels,omitempty"`
	}{Labels: labels}
	b, _ := json.Marshal(v3) // a struct of strings: cannot fail
	return objectMeta{Name: name, Labels: labels, ResourceVersion: resourceVersion, UID: uid,
		Annotations: map[string]string{metadataAnno: string(b)}}
}

type typeMeta struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
}

// clusterInformation is read only: is the datastore ready.
type clusterInformation struct {
	Spec struct {
		DatastoreReady *bool `json:"datastoreReady"`
	} `json:"spec"`
}

type ipamConfigSpec struct {
	AutoAllocateBlocks           bool   `json:"autoAllocateBlocks"`
	KubeVirtVMAddressPersistence string `json:"kubeVirtVMAddressPersistence,omitempty"`
	StrictAffinity               bool   `json:"strictAffinity"`
	MaxBlocksPerHost             int    `json:"maxBlocksPerHost,omitempty"`
}

type ipamConfig struct {
	typeMeta
	Metadata objectMeta     `json:"metadata"`
	Spec     ipamConfigSpec `json:"spec"`
}

type affinitySpec struct {
	CIDR    string `json:"cidr"`
	Deleted string `json:"deleted"` // "true" or "false": a string in Calico's CRD
	Node    string `json:"node"`
	State   string `json:"state"`
	Type    string `json:"type"`
}

type blockAffinity struct {
	typeMeta
	Metadata objectMeta   `json:"metadata"`
	Spec     affinitySpec `json:"spec"`
}

// newAffinity is node's affinity for the block cidr in state.
func newAffinity(node string, cidr netip.Prefix, state string) blockAffinity {
	return blockAffinity{
		typeMeta: typeMeta{apiVersion, "BlockAffinity"},
		Metadata: ipamMeta(kdd.AffinityName(node, cidr), kdd.AffinityLabels(node, cidr), "", ""),
		Spec:     affinitySpec{CIDR: cidr.String(), Deleted: "false", Node: node, State: state, Type: affinityTypeHost},
	}
}

// secondary are an allocation's attributes: the CNI plugin sets namespace,
// node, pod and timestamp. A map, so a block written back keeps the keys
// other writers set (type, say).
type secondary map[string]string

type allocationAttribute struct {
	HandleID  string    `json:"handle_id"`
	Secondary secondary `json:"secondary"`
}

type blockSpec struct {
	Affinity                    *string               `json:"affinity"`
	AffinityClaimTime           string                `json:"affinityClaimTime,omitempty"`
	Allocations                 []*int                `json:"allocations"`
	Attributes                  []allocationAttribute `json:"attributes"`
	CIDR                        string                `json:"cidr"`
	Deleted                     bool                  `json:"deleted"`
	SequenceNumber              uint64                `json:"sequenceNumber"`
	SequenceNumberForAllocation map[string]uint64     `json:"sequenceNumberForAllocation"`
	StrictAffinity              bool                  `json:"strictAffinity"`
	Unallocated                 []int                 `json:"unallocated"`
}

type ipamBlock struct {
	typeMeta
	Metadata objectMeta `json:"metadata"`
	Spec     blockSpec  `json:"spec"`
}

type handleSpec struct {
	Block    map[string]int `json:"block"`
	Deleted  bool           `json:"deleted"`
	HandleID string         `json:"handleID"`
}

type ipamHandle struct {
	typeMeta
	Metadata objectMeta `json:"metadata"`
	Spec     handleSpec `json:"spec"`
}

// ipPool is what the double reads of an IPPool.
type ipPool struct {
	Metadata objectMeta `json:"metadata"`
	Spec     struct {
		CIDR           string   `json:"cidr"`
		BlockSize      int      `json:"blockSize"`
		Disabled       bool     `json:"disabled"`
		NodeSelector   string   `json:"nodeSelector"`
		AllowedUses    []string `json:"allowedUses"`
		AssignmentMode string   `json:"assignmentMode"`
	} `json:"spec"`
}

type ipReservation struct {
	Spec struct {
		ReservedCIDRs []string `json:"reservedCIDRs"`
	} `json:"spec"`
}

// k8sObject is what the double reads of a Pod, Namespace or Node.
type k8sObject struct {
	Metadata objectMeta `json:"metadata"`
}

// Paths of the objects.
func clusterInformationPath() string { return crdAPI + "/clusterinformations/default" }
func ipamConfigPath() string         { return crdAPI + "/ipamconfigs/" + kdd.IPAMConfigName }
func blockPath(cidr netip.Prefix) string {
	return crdAPI + "/ipamblocks/" + kdd.BlockName(cidr)
}
func affinityPath(node string, cidr netip.Prefix) string {
	return crdAPI + "/blockaffinities/" + kdd.AffinityName(node, cidr)
}
func handlePath(handleID string) string { return crdAPI + "/ipamhandles/" + kdd.HandleName(handleID) }
func podPath(ns, pod string) string     { return coreAPI + "/namespaces/" + ns + "/pods/" + pod }

// affinitySelector is the label selector Calico lists a node's IPv4
// affinities by (keys sorted, as Calico sends them).
func affinitySelector(node string) string {
	labels := kdd.AffinityLabels(node, netip.MustParsePrefix("0.0.0.0/0"))
	return strings.Join([]string{
		kdd.LabelAffinityType + "=" + labels[kdd.LabelAffinityType],
		kdd.LabelHostnameHash + "=" + labels[kdd.LabelHostnameHash],
		kdd.LabelIPVersion + "=" + labels[kdd.LabelIPVersion],
	}, ",")
}
