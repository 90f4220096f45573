package kdd

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"strconv"
)

// Labels of a BlockAffinity (the CNI plugin lists a node's affinities by
// them).
const (
	LabelAffinityType = "projectcalico.org/affinity-type"
	LabelHostnameHash = "projectcalico.org/hostname-hash"
	LabelIPVersion    = "projectcalico.org/ip-version"
)

// affinityValue is the etcd value of an affinity (ipam/snapshot.go).
type affinityValue struct {
	State   string `json:"state"`
	Deleted bool   `json:"deleted"`
}

// AffinityLabels are the labels of node's affinity for a block of cidr's
// family.
func AffinityLabels(node string, cidr netip.Prefix) map[string]string {
	v := "4"
	if cidr.Addr().Is6() {
		v = "6"
	}
	return map[string]string{LabelAffinityType: "host", LabelHostnameHash: HostnameHash(node), LabelIPVersion: v}
}

// AffinityToCR converts node's affinity for the block cidr (its etcd value
// {"state","deleted"}) to its BlockAffinity.
func AffinityToCR(node string, cidr netip.Prefix, model, existing []byte) ([]byte, error) {
	what := "affinity " + node + "/" + cidr.String()
	src, err := members(model, what)
	if err != nil {
		return nil, err
	}
	if bad := unknownMember(src, "state", "deleted"); bad != "" {
		return nil, fmt.Errorf("%s.%s: not a field Calico's IPAM stores", what, bad)
	}
	var v affinityValue
	if err := json.Unmarshal(model, &v); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if node == "" || v.State == "" {
		return nil, fmt.Errorf("%s: node and state are required", what)
	}
	var spec object
	spec.addValue("cidr", cidr.Masked().String())
	spec.addValue("deleted", strconv.FormatBool(v.Deleted)) // a string in Calico's CRD
	spec.addValue("node", node)
	spec.addValue("state", v.State)
	spec.addValue("type", "host")
	return ipamCR(KindBlockAffinity, AffinityName(node, cidr), AffinityLabels(node, cidr), spec, existing)
}

// AffinityFromCR converts a BlockAffinity to its etcd value, node and block.
func AffinityFromCR(cr []byte) (Read, string, netip.Prefix, error) {
	r, spec, err := readIPAM(cr, KindBlockAffinity)
	if err != nil {
		return r, "", netip.Prefix{}, err
	}
	what := "BlockAffinity " + r.Name + ": spec"
	if bad := unknownMember(spec, "cidr", "deleted", "node", "state", "type"); bad != "" {
		return r, "", netip.Prefix{}, fmt.Errorf("%s.%s: not a field Calico's IPAM stores", what, bad)
	}
	var s struct{ CIDR, Deleted, Node, State, Type string }
	if err := json.Unmarshal(mustObject(spec), &s); err != nil {
		return r, "", netip.Prefix{}, fmt.Errorf("%s: %w", what, err)
	}
	if s.Type != "" && s.Type != "host" {
		return r, "", netip.Prefix{}, fmt.Errorf("%s.type %q: only host affinities are served", what, s.Type)
	}
	deleted, err := strconv.ParseBool(s.Deleted)
	if err != nil {
		return r, "", netip.Prefix{}, fmt.Errorf("%s.deleted %q: want \"true\" or \"false\"", what, s.Deleted)
	}
	cidr, err := netip.ParsePrefix(s.CIDR)
	if err != nil || s.Node == "" || s.State == "" {
		return r, "", cidr, fmt.Errorf("%s: cidr %q, node %q and state %q are required (%v)", what, s.CIDR, s.Node, s.State, err)
	}
	r.Model, err = json.Marshal(affinityValue{State: s.State, Deleted: deleted})
	return r, s.Node, cidr, err
}
