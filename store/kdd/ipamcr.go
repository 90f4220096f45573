package kdd

import (
	"encoding/json"
	"fmt"
	"net/netip"
)

// The IPAM kinds' models are the values the etcd backend stores (DESIGN.md
// section 2; ipam/block.go, handle.go, config.go): the custom resources hold
// the same content under Calico's CRD field names.

// blockFields map an allocation block (etcd shape) to an IPAMBlock spec.
var blockFields = []field{
	{model: "cidr", cr: "cidr"},
	{model: "affinity", cr: "affinity", toModel: rule{def: json.RawMessage("null")}},
	{model: "affinity_claim_time", cr: "affinityClaimTime", toCR: omitEmpty, toModel: omitEmpty},
	{model: "allocations", cr: "allocations", toCR: emptyList, toModel: emptyList},
	{model: "unallocated", cr: "unallocated", toCR: emptyList, toModel: emptyList},
	{model: "attributes", cr: "attributes", toCR: emptyList, toModel: emptyList},
	{model: "sequenceNumber", cr: "sequenceNumber", toCR: zeroNumber, toModel: zeroNumber},
	{model: "sequenceNumberForAllocation", cr: "sequenceNumberForAllocation", toCR: emptyMap, toModel: emptyMap},
	{model: "deleted", cr: "deleted", toCR: falseBool, toModel: falseBool},
	// Calico's etcd blocks have no strictAffinity; the CRD requires it.
	{model: "strictAffinity", cr: "strictAffinity", toCR: falseBool, toModel: omitFalse},
}

// handleFields map a handle (etcd shape) to an IPAMHandle spec (which also
// holds handleID).
var handleFields = []field{
	{model: "block", cr: "block", toCR: emptyMap, toModel: emptyMap},
	{model: "deleted", cr: "deleted", toCR: falseBool, toModel: falseBool},
}

// configFields map the IPAM config (etcd shape) to the IPAMConfig spec.
var configFields = []field{
	{model: "strict_affinity", cr: "strictAffinity", toCR: falseBool, toModel: omitFalse},
	{model: "auto_allocate_blocks", cr: "autoAllocateBlocks", toCR: falseBool, toModel: falseBool},
	{model: "maxBlocksPerHost", cr: "maxBlocksPerHost", toCR: omitZero, toModel: omitZero},
	{model: "kubeVirtVMAddressPersistence", cr: "kubeVirtVMAddressPersistence", toCR: omitEmpty, toModel: omitEmpty},
}

// BlockToCR converts an allocation block to its IPAMBlock. existing, when
// not nil, is the stored IPAMBlock it replaces (its uid and
// resourceVersion are kept).
func BlockToCR(model, existing []byte) ([]byte, error) {
	src, err := members(model, "block")
	if err != nil {
		return nil, err
	}
	spec, err := convert(src, blockFields, true, "block")
	if err != nil {
		return nil, err
	}
	cidr, err := prefixOf(src, "cidr", "block")
	if err != nil {
		return nil, err
	}
	return ipamCR(KindIPAMBlock, BlockName(cidr), nil, spec, existing)
}

// BlockFromCR converts an IPAMBlock to its allocation block and CIDR.
func BlockFromCR(cr []byte) (Read, netip.Prefix, error) {
	r, spec, err := readIPAM(cr, KindIPAMBlock)
	if err != nil {
		return r, netip.Prefix{}, err
	}
	cidr, err := prefixOf(spec, "cidr", "spec")
	if err != nil {
		return r, cidr, err
	}
	o, err := convert(spec, blockFields, false, "spec")
	if err != nil {
		return r, cidr, err
	}
	r.Model, err = json.Marshal(o)
	return r, cidr, err
}

// HandleToCR converts a handle to its IPAMHandle.
func HandleToCR(handleID string, model, existing []byte) ([]byte, error) {
	if handleID == "" {
		return nil, fmt.Errorf("handle: empty handle ID")
	}
	src, err := members(model, "handle "+handleID)
	if err != nil {
		return nil, err
	}
	spec, err := convert(src, handleFields, true, "handle "+handleID)
	if err != nil {
		return nil, err
	}
	spec.addValue("handleID", handleID)
	return ipamCR(KindIPAMHandle, HandleName(handleID), nil, spec, existing)
}

// HandleFromCR converts an IPAMHandle to its handle and handle ID.
func HandleFromCR(cr []byte) (Read, string, error) {
	r, spec, err := readIPAM(cr, KindIPAMHandle)
	if err != nil {
		return r, "", err
	}
	id, err := stringOf(spec, "handleID", "spec")
	if err != nil || id == "" {
		return r, "", fmt.Errorf("IPAMHandle %s: spec.handleID: missing (%v)", r.Name, err)
	}
	delete(spec, "handleID")
	o, err := convert(spec, handleFields, false, "spec")
	if err != nil {
		return r, id, err
	}
	r.Model, err = json.Marshal(o)
	return r, id, err
}

// ConfigToCR converts the IPAM config to the IPAMConfig "default".
func ConfigToCR(model, existing []byte) ([]byte, error) {
	src, err := members(model, "IPAM config")
	if err != nil {
		return nil, err
	}
	spec, err := convert(src, configFields, true, "IPAM config")
	if err != nil {
		return nil, err
	}
	return ipamCR(KindIPAMConfig, IPAMConfigName, nil, spec, existing)
}

// ConfigFromCR converts an IPAMConfig to the IPAM config.
func ConfigFromCR(cr []byte) (Read, error) {
	r, spec, err := readIPAM(cr, KindIPAMConfig)
	if err != nil {
		return r, err
	}
	o, err := convert(spec, configFields, false, "spec")
	if err != nil {
		return r, err
	}
	r.Model, err = json.Marshal(o)
	return r, err
}

// prefixOf parses a CIDR member.
func prefixOf(m map[string]json.RawMessage, key, what string) (netip.Prefix, error) {
	s, err := stringOf(m, key, what)
	if err != nil {
		return netip.Prefix{}, err
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return p, fmt.Errorf("%s.%s: %w", what, key, err)
	}
	return p, nil
}

// ipamCR builds an IPAM custom resource. Its metadata annotation is what
// Calico writes for IPAM objects: {"creationTimestamp":null}, with the
// labels when there are any.
func ipamCR(kind, name string, labels map[string]string, spec object, existing []byte) ([]byte, error) {
	var ann object
	ann.add("creationTimestamp", json.RawMessage("null"))
	var meta object
	meta.addValue("name", name)
	if existing != nil {
		var ex struct{ Metadata crMeta }
		if err := json.Unmarshal(existing, &ex); err != nil {
			return nil, fmt.Errorf("existing %s: %w", kind, err)
		}
		if ex.Metadata.Name != name {
			return nil, fmt.Errorf("existing %s is %s, not %s", kind, ex.Metadata.Name, name)
		}
		meta.addValue("uid", ex.Metadata.UID)
		meta.addValue("resourceVersion", ex.Metadata.ResourceVersion)
	}
	if labels != nil {
		meta.addValue("labels", labels)
		ann.addValue("labels", labels)
	}
	annJSON, err := json.Marshal(ann)
	if err != nil {
		return nil, err
	}
	meta.addValue("annotations", map[string]string{MetadataAnnotation: string(annJSON)})
	var o object
	o.addValue("apiVersion", APIVersion)
	o.addValue("kind", kind)
	o.addValue("metadata", meta)
	o.addValue("spec", spec)
	return json.Marshal(o)
}

// readIPAM checks an IPAM custom resource's kind and returns its identity
// and spec members.
func readIPAM(cr []byte, kind string) (Read, map[string]json.RawMessage, error) {
	top, err := members(cr, kind)
	if err != nil {
		return Read{}, nil, err
	}
	if bad := unknownMember(top, "kind", "apiVersion", "metadata", "spec"); bad != "" {
		return Read{}, nil, fmt.Errorf("%s: %s: not a field of the custom resource", kind, bad)
	}
	var h struct {
		Kind, APIVersion string
		Metadata         crMeta
	}
	if err := json.Unmarshal(cr, &h); err != nil {
		return Read{}, nil, fmt.Errorf("%s: %w", kind, err)
	}
	if h.Kind != kind || h.APIVersion != APIVersion {
		return Read{}, nil, fmt.Errorf("want a %s %s, got %s %s", APIVersion, kind, h.APIVersion, h.Kind)
	}
	r := Read{Kind: kind, Name: h.Metadata.Name, ResourceVersion: h.Metadata.ResourceVersion, UID: h.Metadata.UID}
	spec, err := members(orEmpty(top["spec"]), kind+" "+r.Name+": spec")
	return r, spec, err
}
