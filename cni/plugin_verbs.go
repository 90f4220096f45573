package cni

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"

	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"

	"github.com/calico-aio/calico-aio/store/api"
)

// del tears the pod down. It succeeds when things are already gone, with
// the netns gone, and with the datastore down (the release and endpoint
// delete are then journaled and replayed by the next call or the agent).
func (p *plugin) del(a *skel.CmdArgs) error {
	s, err := p.newSession(a)
	if err != nil {
		return err
	}
	defer s.close()
	ctx := context.Background()
	id := newIdentity(s.node, a.ContainerID, a.IfName, s.args)
	if err := s.kddReady(ctx, id); err != nil {
		return err
	}
	if err := s.etcdLocked(ctx, true); err != nil {
		return err
	}
	if err := RemoveHostIface(s.recordedHostIface(ctx, a, id), a.Netns, a.IfName); err != nil {
		return types.NewError(types.ErrInternal, "removing the pod's veth", err.Error())
	}
	if s.conf.IPAM.Type != "calico-ipam" {
		if err := invoke.DelegateDel(ctx, s.conf.IPAM.Type, delIPAMStdin(s.conf, a.StdinData), nil); err != nil {
			return err
		}
	}
	// With a delegated IPAM the handle holds nothing and its release is a no-op.
	pd := pendingDelete{Handle: handleID(s.conf.Name, a.ContainerID), Namespace: id.namespace, Endpoint: id.endpoint, ContainerID: id.containerID}
	// The IPAM lock is for the node's blocks: the endpoint goes first,
	// outside it (Calico's plugin too deletes it before calico-ipam takes
	// the lock), and the lock is let go once the blocks are written, before
	// the handle (the container's own) is deleted. A node's DELs wait for
	// each other's block writes only.
	if pd.Endpoint != "" {
		err = deleteEndpoint(ctx, s.cl, pd.Namespace, pd.Endpoint, pd.ContainerID)
	}
	lock, lerr := lockFile(s.lockPath())
	if lerr != nil {
		return types.NewError(types.ErrIOFailure, "IPAM lock", lerr.Error())
	}
	defer lock.unlock()
	if err == nil {
		// The datastore answers: what earlier calls journaled first, while
		// the lock is held.
		s.replayJournal(ctx)
		_, err = s.al.ReleaseByHandleThen(ctx, pd.Handle, lock.unlock)
	}
	if err != nil { // the journal replays the endpoint's delete too: gone, it is skipped
		slog.Warn("datastore unavailable during DEL; journaling", "endpoint", id.endpoint, "err", err)
		if jerr := s.conf.journal(pd); jerr != nil {
			return types.NewError(types.ErrIOFailure, "could not complete DEL nor journal it", fmt.Sprintf("%v; %v", err, jerr))
		}
	}
	return nil
}

// recordedHostIface is the host interface the pod's endpoint records,
// needed only when the pod's interface no longer leads to it: "" when the
// interface does, or when the endpoint is gone or unreadable.
func (s *session) recordedHostIface(ctx context.Context, a *skel.CmdArgs, id identity) string {
	if a.Netns != "" {
		if peer, _ := hostPeerOf(a.Netns, a.IfName); peer != nil {
			return ""
		}
	}
	wep, err := s.existingEndpoint(ctx, id)
	if err != nil || wep == nil || wep.Spec.Node != s.node {
		return ""
	}
	return wep.Spec.InterfaceName
}

// check verifies that the pod is wired as ADD left it and that its
// endpoint is in the datastore and matches.
func (p *plugin) check(a *skel.CmdArgs) error {
	s, err := p.newSession(a)
	if err != nil {
		return err
	}
	defer s.close()
	id := newIdentity(s.node, a.ContainerID, a.IfName, s.args)
	wep, err := s.existingEndpoint(context.Background(), id)
	if err != nil {
		return err
	}
	if wep == nil {
		return types.NewError(types.ErrUnknownContainer, fmt.Sprintf("no WorkloadEndpoint %s/%s for container %s", id.namespace, id.endpoint, a.ContainerID), "")
	}
	if wep.Spec.Node != s.node {
		return types.NewError(types.ErrInternal, fmt.Sprintf("WorkloadEndpoint %s is on node %s, want %s", id.endpoint, wep.Spec.Node, s.node), "")
	}
	peer, err := hostPeerOf(a.Netns, a.IfName)
	if err != nil {
		return types.NewError(types.ErrInternal, err.Error(), "")
	}
	if peer == nil || peer.Attrs().Name != wep.Spec.InterfaceName {
		got := "no host interface"
		if peer != nil {
			got = "host interface " + peer.Attrs().Name
		}
		return types.NewError(types.ErrInternal, fmt.Sprintf("WorkloadEndpoint %s names interface %s, but pod interface %s leads to %s", id.endpoint, wep.Spec.InterfaceName, a.IfName, got), "")
	}
	addrs := endpointAddrs(wep)
	if err := checkHost(wep.Spec.InterfaceName, addrs); err != nil {
		return types.NewError(types.ErrInternal, err.Error(), "")
	}
	if err := checkPod(a.Netns, a.IfName, wep.Spec.MAC, addrs, s.conf.podRoutes()); err != nil {
		return types.NewError(types.ErrInternal, err.Error(), "")
	}
	return nil
}

// endpointAddrs are the addresses of the endpoint's ipNetworks.
func endpointAddrs(wep *api.WorkloadEndpoint) []netip.Addr {
	var addrs []netip.Addr
	for _, n := range wep.Spec.IPNetworks {
		if pr, err := netip.ParsePrefix(n); err == nil {
			addrs = append(addrs, pr.Addr())
		}
	}
	return addrs
}

// wiredHost: the endpoint's host veth exists, is up and routes its
// addresses (checkHost), logged when not.
func wiredHost(wep *api.WorkloadEndpoint) bool {
	err := checkHost(wep.Spec.InterfaceName, endpointAddrs(wep))
	if err != nil {
		slog.Info("the endpoint exists but its pod is not wired; wiring it again", "endpoint", wep.Metadata.Name, "err", err)
	}
	return err == nil
}

// checkHost: the host veth exists, is up, and routes each pod address.
func checkHost(hostVeth string, addrs []netip.Addr) error {
	link, err := netlink.LinkByName(hostVeth)
	if err != nil {
		return fmt.Errorf("host interface %s: %w", hostVeth, err)
	}
	if link.Attrs().Flags&net.FlagUp == 0 {
		return fmt.Errorf("host interface %s is down", hostVeth)
	}
	for _, a := range addrs {
		if dev, err := HostRouteDev(a); err != nil || dev != hostVeth {
			return fmt.Errorf("no host route for %s via %s", a, hostVeth)
		}
	}
	return nil
}

// checkPod: the pod interface has the MAC and exactly the addresses, and
// the gateway routes (custom: those instead of the default ones).
func checkPod(netnsPath, ifName, mac string, addrs []netip.Addr, custom []netip.Prefix) error {
	target, err := ns.GetNS(netnsPath)
	if err != nil {
		return fmt.Errorf("network namespace %s: %w", netnsPath, err)
	}
	defer target.Close()
	return target.Do(func(ns.NetNS) error {
		link, err := netlink.LinkByName(ifName)
		if err != nil {
			return fmt.Errorf("pod interface %s: %w", ifName, err)
		}
		if got := link.Attrs().HardwareAddr.String(); mac != "" && got != mac { // no MAC on Kubernetes (cni/kdd.go)
			return fmt.Errorf("pod interface %s has MAC %s, endpoint says %s", ifName, got, mac)
		}
		have, err := netlink.AddrList(link, netlink.FAMILY_ALL)
		if err != nil {
			return err
		}
		var got []string
		for _, h := range have {
			if h.IP.IsLinkLocalUnicast() {
				continue
			}
			got = append(got, h.IPNet.String())
		}
		for _, a := range addrs {
			if !slices.Contains(got, hostPrefix(a).String()) {
				return fmt.Errorf("pod interface %s lacks address %s (has %v)", ifName, a, got)
			}
		}
		if len(got) != len(addrs) {
			return fmt.Errorf("pod interface %s has addresses %v, want %v", ifName, got, addrs)
		}
		routes, err := netlink.RouteList(link, netlink.FAMILY_ALL)
		if err != nil {
			return err
		}
		if len(custom) > 0 {
			return checkCustomRoutes(routes, addrs, custom)
		}
		for _, a := range addrs {
			if !hasDefaultRoute(routes, a.Is4()) {
				return fmt.Errorf("pod has no default route for %s", a)
			}
		}
		return nil
	})
}

// checkCustomRoutes: each ipam.routes destination of the pod's address
// families is routed.
func checkCustomRoutes(routes []netlink.Route, addrs []netip.Addr, custom []netip.Prefix) error {
	for _, p := range custom {
		if !slices.ContainsFunc(addrs, func(a netip.Addr) bool { return a.Is4() == p.Addr().Is4() }) {
			continue
		}
		if !slices.ContainsFunc(routes, func(r netlink.Route) bool { return routeDst(r) == p }) {
			return fmt.Errorf("pod has no route to %s", p)
		}
	}
	return nil
}

func routeDst(r netlink.Route) netip.Prefix {
	if r.Dst == nil {
		if r.Family == netlink.FAMILY_V6 {
			return netip.MustParsePrefix("::/0")
		}
		return netip.MustParsePrefix("0.0.0.0/0")
	}
	a, _ := netip.AddrFromSlice(r.Dst.IP)
	ones, _ := r.Dst.Mask.Size()
	return netip.PrefixFrom(a.Unmap(), ones)
}

func hasDefaultRoute(routes []netlink.Route, v4 bool) bool {
	for _, r := range routes {
		isDefault := r.Dst == nil
		if r.Dst != nil {
			ones, _ := r.Dst.Mask.Size()
			isDefault = ones == 0
		}
		if isDefault && r.Gw != nil && (r.Gw.To4() != nil) == v4 {
			want := hostLinkLocal
			if v4 {
				want = gatewayV4
			}
			if r.Gw.Equal(want) {
				return true
			}
		}
	}
	return false
}

func (p *plugin) status(a *skel.CmdArgs) error {
	s, err := p.newSession(a)
	if err != nil {
		return err
	}
	defer s.close()
	return s.checkServable(context.Background())
}

// gc releases this network's stale allocations on this node (as the IPAM
// plugin does) and deletes this node's endpoints of this network whose
// attachment is no longer valid (on Kubernetes: empties their pods'
// address annotations; pods without addresses have nothing to delete).
func (p *plugin) gc(a *skel.CmdArgs) error {
	s, err := p.newSession(a)
	if err != nil {
		return err
	}
	defer s.close()
	ctx := context.Background()
	released, err := s.gcAllocations(ctx)
	if err != nil {
		return err
	}
	valid := map[string]bool{}
	list := s.conf.ValidAttachments
	if list == nil {
		list = s.conf.Attachments
	}
	for _, at := range list {
		valid[at.ContainerID+"/"+at.IfName] = true
	}
	stale := map[string]bool{}
	for _, h := range released {
		stale[h] = true
	}
	weps, _, err := s.cl.ListResources(ctx, wepKind, "")
	if err != nil {
		return types.NewError(types.ErrTryAgainLater, "datastore error during GC", err.Error())
	}
	for _, r := range weps {
		w := r.(*api.WorkloadEndpoint)
		if w.Spec.Node != s.node || valid[w.Spec.ContainerID+"/"+w.Spec.Endpoint] || s.kdd() && !addressed(w) {
			continue
		}
		if !stale[handleID(s.conf.Name, w.Spec.ContainerID)] && !slices.Contains(w.Spec.Profiles, s.conf.Name) {
			continue // another network's endpoint
		}
		if err := deleteEndpoint(ctx, s.cl, w.Metadata.Namespace, w.Metadata.Name, w.Spec.ContainerID); err != nil {
			return types.NewError(types.ErrTryAgainLater, "deleting stale endpoint "+w.Metadata.Name, err.Error())
		}
	}
	return nil
}
