package ctl

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	"github.com/calico-aio/calico-aio/ipam"
	"github.com/calico-aio/calico-aio/store"
	"github.com/calico-aio/calico-aio/store/api"
)

// deleteNode deletes a Node the way calicoctl does (libcalico-go's node
// client): release the addresses of the node's workload endpoints and its
// tunnel addresses (IPIP, VXLAN and, beyond Calico's list, IPv6 VXLAN),
// delete those endpoints, release the node's block affinities (blocks still
// in use keep their addresses and lose the affinity), delete BGPPeers with
// spec.node set to it and the FelixConfiguration and BGPConfiguration
// "node.<name>", then the Node itself. As in Calico, a missing Node does
// not stop the clean-up; the final delete reports it.
func deleteNode(ctx context.Context, c *store.Client, n *api.Node) error {
	name := n.Metadata.Name
	weps, err := listKind(ctx, c, "WorkloadEndpoint")
	if err != nil {
		return err
	}
	var mine []api.Resource
	var addrs []ipam.ReleaseOptions
	for _, r := range weps {
		w := r.(*api.WorkloadEndpoint)
		if w.Spec.Node != name {
			continue
		}
		mine = append(mine, w)
		for _, s := range w.Spec.IPNetworks {
			if p, err := api.ParseCIDROrIP(s); err == nil {
				addrs = append(addrs, ipam.ReleaseOptions{Addr: p.Addr()})
			}
		}
	}
	nk, _ := api.LookupKind("Node")
	if cur, err := c.GetResource(ctx, nk, "", name); err == nil {
		s := cur.(*api.Node).Spec
		tunnels := []string{s.IPv4VXLANTunnelAddr, s.IPv6VXLANTunnelAddr}
		if s.BGP != nil {
			tunnels = append(tunnels, s.BGP.IPv4IPIPTunnelAddr)
		}
		for _, t := range tunnels {
			if a, err := netip.ParseAddr(t); err == nil {
				addrs = append(addrs, ipam.ReleaseOptions{Addr: a})
			}
		}
	} else if !errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("reading node %s: %w", name, err)
	}
	al := ipam.New(c)
	if len(addrs) > 0 {
		if _, err := al.ReleaseIPs(ctx, addrs); err != nil {
			return fmt.Errorf("node %s: releasing its addresses: %w", name, err)
		}
	}
	for _, w := range mine {
		if _, err := c.DeleteObject(ctx, w); err != nil && !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("node %s: deleting %s: %w", name, resourceID(w), err)
		}
	}
	if _, err := al.ReleaseNodeAffinities(ctx, name, false); err != nil {
		return fmt.Errorf("node %s: releasing block affinities: %w", name, err)
	}
	peers, err := listKind(ctx, c, "BGPPeer")
	if err != nil {
		return err
	}
	for _, r := range peers {
		if r.(*api.BGPPeer).Spec.Node == name {
			if _, err := c.DeleteObject(ctx, r); err != nil && !errors.Is(err, store.ErrNotFound) {
				return fmt.Errorf("node %s: deleting %s: %w", name, resourceID(r), err)
			}
		}
	}
	for _, kind := range []string{"FelixConfiguration", "BGPConfiguration"} {
		k, _ := api.LookupKind(kind)
		if _, err := c.DeleteResource(ctx, k, "", "node."+name, ""); err != nil && !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("node %s: deleting %s(node.%s): %w", name, kind, name, err)
		}
	}
	_, err = c.DeleteObject(ctx, n)
	return err
}

func listKind(ctx context.Context, c *store.Client, kind string) ([]api.Resource, error) {
	k, _ := api.LookupKind(kind)
	rs, _, err := c.ListResources(ctx, k, "")
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", k.Plural, err)
	}
	return rs, nil
}
