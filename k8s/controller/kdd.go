package controller

import (
	"context"
	"fmt"
	"slices"

	"github.com/calico-aio/calico-aio/ipam"
)

// On the Kubernetes datastore (Controller.KDD) the controller copies
// nothing: Calico's agents read profiles (Namespaces, ServiceAccounts),
// Kubernetes NetworkPolicies, Services and workload endpoints (Pods)
// directly from the API, and a Calico Node is the Kubernetes Node itself,
// labels included. As Calico's kube-controllers in that mode, it only
// collects garbage: the addresses of deleted pods (collectPods) and the
// IPAM of deleted nodes (collectKDDNodes).

// collectKDDNodes releases the IPAM a deleted Kubernetes node left: the
// addresses it allocated and its block affinities. A node is a candidate
// when IPAM names it (an affine block, or an allocation's node attribute)
// and the API lists no such node; it is released only once it has been
// missing for LeakGracePeriod at every pass since and a GET then answers
// NotFound. When a list fails, nothing is released.
func (c *Controller) collectKDDNodes(ctx context.Context) error {
	if c.LeakGracePeriod <= 0 {
		return nil
	}
	blocks, err := c.ipam.ListBlocks(ctx)
	if err != nil {
		return fmt.Errorf("listing IPAM blocks: %w", err)
	}
	exists, err := c.kubeNodeNames(ctx)
	if err != nil {
		return err
	}
	var orphans []string
	for _, node := range ipamNodes(blocks) {
		if !exists[node] {
			orphans = append(orphans, node)
		}
	}
	return c.reapGoneNodes(ctx, orphans, func(node string) string { return node },
		func(ctx context.Context, node string) (string, error) {
			if err := c.releaseNodeIPAM(ctx, node); err != nil {
				return "", err
			}
			return "released the IPAM of node " + node, nil
		})
}

// ipamNodes are the nodes blocks name, sorted: their affinities' hosts and
// their allocations' node attributes.
func ipamNodes(blocks []ipam.BlockInfo) []string {
	var out []string
	for _, b := range blocks {
		if h := b.Block.Host(); h != "" {
			out = append(out, h)
		}
		for _, al := range b.Allocations() {
			if n := al.Attrs[ipam.AttrNode]; n != "" {
				out = append(out, n)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// releaseNodeIPAM releases node's addresses, then its block affinities.
func (c *Controller) releaseNodeIPAM(ctx context.Context, node string) error {
	if err := c.releaseNodeAddrs(ctx, node); err != nil {
		return err
	}
	released, err := c.ipam.ReleaseNodeAffinities(ctx, node, false)
	if err != nil {
		return fmt.Errorf("node %s: releasing block affinities: %w", node, err)
	}
	if released > 0 {
		c.logf("kube-controllers: released %d block affinities of removed node %s", released, node)
	}
	return nil
}
