package cni

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"syscall"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"

	"github.com/calico-aio/calico-aio/store"
	"github.com/calico-aio/calico-aio/store/api"
)

// The host side's name of a workload's veth pair. The first choice is
// Calico's deterministic "cali" + 11 characters, but workload IDs that
// share a prefix (containerd names containers "<namespace>-<name>") clash
// on it. An interface that already has the name is replaced only when it
// is provably this workload's own leftover:
//   - its other end is this workload's interface (an earlier attempt), or
//   - this workload's endpoint records it and no other endpoint does, or
//   - no endpoint on the node records it and it is a veth whose other end
//     is on the host too (a pair never handed to a workload).
//
// An interface whose other end is in another live namespace, a name
// another endpoint records, or an interface that is not a veth belong to
// someone else: the workload then takes the next name of a sequence that
// is stable for it ("cali" + a hash of its endpoint and a counter). The
// endpoint records the name taken; DEL, CHECK and the calicoctl verbs use
// the recorded one, or find the host side as the peer of the workload's
// interface. The CNI plugin, the libnetwork driver and "calicoctl
// container add" all choose with HostIface.

// maxAlternatives bounds the alternative names tried after the first choice.
const maxAlternatives = 16

// Claims are the host interface names that endpoints on a node record,
// each with the endpoints ("namespace/name") recording it.
type Claims map[string][]string

// ClaimsSource reads Claims when a choice needs them.
type ClaimsSource func() (Claims, error)

// Source is c as a ClaimsSource.
func (c Claims) Source() ClaimsSource { return func() (Claims, error) { return c, nil } }

// NodeClaimsSource reads NodeClaims(ctx, cl, node) when called. Listing
// every endpoint costs a read of the whole cluster's endpoints, so a
// choice calls it only when its first-choice name is already taken.
func NodeClaimsSource(ctx context.Context, cl *store.Client, node string) ClaimsSource {
	return func() (Claims, error) { return NodeClaims(ctx, cl, node) }
}

// NodeClaims lists the host interface names the endpoints on node record.
func NodeClaims(ctx context.Context, cl *store.Client, node string) (Claims, error) {
	all, _, err := cl.ListResources(ctx, wepKind, "")
	if err != nil {
		return nil, fmt.Errorf("listing the WorkloadEndpoints of node %s: %w", node, err)
	}
	c := Claims{}
	for _, r := range all {
		w := r.(*api.WorkloadEndpoint)
		if w.Spec.Node == node && w.Spec.InterfaceName != "" {
			c[w.Spec.InterfaceName] = append(c[w.Spec.InterfaceName], EndpointKey(w.Metadata.Namespace, w.Metadata.Name))
		}
	}
	return c, nil
}

// EndpointKey is how Claims name an endpoint.
func EndpointKey(namespace, name string) string { return namespace + "/" + name }

// IfaceState is what the host has under a candidate name.
type IfaceState int

const (
	// IfaceAbsent: no interface has the name.
	IfaceAbsent IfaceState = iota
	// IfaceOfThis: a veth whose other end is this workload's interface.
	IfaceOfThis
	// IfaceLive: a veth whose other end is in another (live) namespace.
	IfaceLive
	// IfaceStray: a veth with both ends on the host.
	IfaceStray
	// IfaceForeign: an interface that is not a veth.
	IfaceForeign
)

// HostIface is one workload's request for a host interface name.
type HostIface struct {
	Preferred string // the deterministic first choice
	Self      string // the workload's endpoint (EndpointKey): its claims are ours; salts the alternatives
	Netns     string // the namespace of the workload's end ("" when the pair is made on the host)
	IfName    string // the workload's end's name in Netns
	Claims    Claims // what the node's endpoints record (nil: LoadClaims reads them)
	// LoadClaims reads Claims when Claims is nil and the first choice is
	// taken. While the first-choice name is free (nearly every ADD) the
	// workload takes it without reading anything: an endpoint that records
	// the name but whose interface is gone has no host state to protect.
	LoadClaims ClaimsSource
}

// candidates are the names to try in order: those this workload's
// endpoint already records, the first choice, then the alternatives.
func (h HostIface) candidates() []string {
	var out []string
	for name, owners := range h.Claims {
		if slices.Contains(owners, h.Self) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	out = append(out, h.Preferred)
	for i := 1; i <= maxAlternatives; i++ {
		sum := sha1.Sum([]byte(h.Self + "#" + strconv.Itoa(i)))
		out = append(out, "cali"+hex.EncodeToString(sum[:])[:11])
	}
	return slices.Compact(out)
}

// claimedByOther reports whether an endpoint other than this workload's
// records name.
func (h HostIface) claimedByOther(name string) bool {
	return slices.ContainsFunc(h.Claims[name], func(o string) bool { return o != h.Self })
}

// decide says whether name may be used, and whether an interface of that
// name is this workload's leftover, to be removed first.
func (h HostIface) decide(name string, st IfaceState) (use, replace bool) {
	if st == IfaceOfThis {
		return true, true
	}
	if h.claimedByOther(name) {
		return false, false
	}
	mine := slices.Contains(h.Claims[name], h.Self)
	switch st {
	case IfaceAbsent:
		return true, false
	case IfaceLive:
		return mine, mine
	case IfaceStray:
		return true, true
	}
	return false, false
}

// ChooseBy picks the name with probe telling what the host has under a
// name. replace says an interface of that name is this workload's
// leftover and goes first.
func (h HostIface) ChooseBy(probe func(name string) (IfaceState, error)) (name string, replace bool, err error) {
	if h.Claims == nil && h.LoadClaims != nil {
		st, err := probe(h.Preferred)
		if err != nil {
			return "", false, err
		}
		if st == IfaceAbsent || st == IfaceOfThis {
			return h.Preferred, st == IfaceOfThis, nil
		}
		if h.Claims, err = h.LoadClaims(); err != nil {
			return "", false, err
		}
	}
	for _, c := range h.candidates() {
		st, err := probe(c)
		if err != nil {
			return "", false, err
		}
		if use, repl := h.decide(c, st); use {
			return c, repl, nil
		}
	}
	return "", false, fmt.Errorf("no free host interface name for endpoint %s: %s and %d alternatives belong to other workloads", h.Self, h.Preferred, maxAlternatives)
}

// HostIfaceChoice is a chosen name and, when it has one, this workload's
// leftover interface of that name.
type HostIfaceChoice struct {
	Name     string
	leftover netlink.Link
}

// Choose picks the name by what the host (the current namespace) has.
func (h HostIface) Choose() (HostIfaceChoice, error) {
	found := map[string]netlink.Link{}
	name, replace, err := h.ChooseBy(func(name string) (IfaceState, error) {
		st, l, err := probeHostIface(name, h.Netns, h.IfName)
		found[name] = l
		return st, err
	})
	if err != nil {
		return HostIfaceChoice{}, err
	}
	c := HostIfaceChoice{Name: name}
	if replace {
		c.leftover = found[name]
	}
	return c, nil
}

// RemoveLeftover deletes the workload's leftover interface, if any.
func (c HostIfaceChoice) RemoveLeftover() error {
	if c.leftover == nil {
		return nil
	}
	if err := netlink.LinkDel(c.leftover); err != nil && !errors.Is(err, syscall.ENODEV) {
		return fmt.Errorf("deleting leftover interface %s: %w", c.Name, err)
	}
	return nil
}

// probeHostIface tells what the host has under name, relative to the
// workload interface ifName in netns ("" for none).
func probeHostIface(name, netnsPath, ifName string) (IfaceState, netlink.Link, error) {
	l, err := netlink.LinkByName(name)
	if err != nil {
		var nf netlink.LinkNotFoundError
		if errors.As(err, &nf) {
			return IfaceAbsent, nil, nil
		}
		return 0, nil, fmt.Errorf("looking up host interface %s: %w", name, err)
	}
	if _, ok := l.(*netlink.Veth); !ok {
		return IfaceForeign, l, nil
	}
	if l.Attrs().NetNsID < 0 {
		return IfaceStray, l, nil
	}
	if netnsPath != "" {
		if peer, _ := hostPeerOf(netnsPath, ifName); peer != nil && peer.Attrs().Index == l.Attrs().Index {
			return IfaceOfThis, l, nil
		}
	}
	return IfaceLive, l, nil
}

// hostPeerOf finds the host end (in the current namespace) of the veth
// ifName in netns; nil when there is none (no namespace, no interface, not
// a veth, or its peer is elsewhere).
func hostPeerOf(netnsPath, ifName string) (netlink.Link, error) {
	target, err := ns.GetNS(netnsPath)
	if err != nil {
		return nil, nil
	}
	defer target.Close()
	var podIdx, peerIdx int
	err = target.Do(func(ns.NetNS) error {
		l, err := netlink.LinkByName(ifName)
		if err != nil {
			return nil
		}
		v, ok := l.(*netlink.Veth)
		if !ok || l.Attrs().NetNsID < 0 {
			return nil
		}
		idx, err := netlink.VethPeerIndex(v)
		if err != nil {
			return fmt.Errorf("peer of %s in %s: %w", ifName, netnsPath, err)
		}
		podIdx, peerIdx = l.Attrs().Index, idx
		return nil
	})
	if err != nil || peerIdx <= 0 {
		return nil, err
	}
	host, err := netlink.LinkByIndex(peerIdx)
	if err != nil {
		return nil, nil
	}
	v, ok := host.(*netlink.Veth)
	if !ok {
		return nil, nil
	}
	// The same index may exist in any namespace: the host end must point
	// back at the interface, in that very namespace.
	nsid, err := netlink.GetNetNsIdByFd(int(target.Fd()))
	if err != nil || nsid < 0 || host.Attrs().NetNsID != nsid {
		return nil, nil
	}
	if back, err := netlink.VethPeerIndex(v); err != nil || back != podIdx {
		return nil, nil
	}
	return host, nil
}

// RemoveHostIface deletes a workload's host end: the peer of ifName in
// netns when there is one; else recorded, the name the workload's endpoint
// records ("" when unknown), when it is a veth with both ends on the host
// or, with the workload's namespace unknown (netnsPath ""), one whose other
// end is in a workload. Nothing else is touched (a veth whose other end is
// not in the workload's known namespace is another's), and what is gone
// is done.
func RemoveHostIface(recorded, netnsPath, ifName string) error {
	var l netlink.Link
	if netnsPath != "" {
		peer, err := hostPeerOf(netnsPath, ifName)
		if err != nil {
			return err
		}
		l = peer
	}
	if l == nil && recorded != "" {
		st, rl, err := probeHostIface(recorded, "", "")
		if err != nil {
			return err
		}
		if st == IfaceStray || (st == IfaceLive && netnsPath == "") {
			l = rl
		}
	}
	if l == nil {
		return nil
	}
	if err := netlink.LinkDel(l); err != nil && !errors.Is(err, syscall.ENODEV) {
		return fmt.Errorf("deleting %s: %w", l.Attrs().Name, err)
	}
	return nil
}
