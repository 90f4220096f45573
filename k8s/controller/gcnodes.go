package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/calico-aio/calico-aio/ipam"
	"github.com/calico-aio/calico-aio/k8s"
	"github.com/calico-aio/calico-aio/store"
	"github.com/calico-aio/calico-aio/store/api"
)

// k8sNodeRef is the Kubernetes node a Calico Node stands for ("" when it
// has no k8s orchRef).
func k8sNodeRef(n *api.Node) string {
	for _, o := range n.Spec.OrchRefs {
		if o.Orchestrator == k8s.OrchestratorK8s && o.NodeName != "" {
			return o.NodeName
		}
	}
	return ""
}

// collectNodes removes the Calico Nodes whose k8s orchRef names a
// Kubernetes node that is not in the API, once it has been missing for
// LeakGracePeriod at every pass since and a GET then answers NotFound:
// their Kubernetes endpoints, their addresses, their block affinities and
// then the Node. Nodes without a k8s orchRef are never touched; when a
// list fails, nothing is removed.
func (c *Controller) collectNodes(ctx context.Context) error {
	if c.LeakGracePeriod <= 0 {
		return nil
	}
	rs, _, err := c.store.ListResources(ctx, nodeKind, "")
	if err != nil {
		return fmt.Errorf("listing nodes: %w", err)
	}
	exists, err := c.kubeNodeNames(ctx)
	if err != nil {
		return err
	}
	orphans := map[string]*api.Node{}
	var keys []string
	for _, r := range rs {
		n := r.(*api.Node)
		if ref := k8sNodeRef(n); ref != "" && !exists[ref] {
			orphans[n.Metadata.Name] = n
			keys = append(keys, n.Metadata.Name)
		}
	}
	slices.Sort(keys)
	return c.reapGoneNodes(ctx, keys, func(k string) string { return k8sNodeRef(orphans[k]) },
		func(ctx context.Context, k string) (string, error) {
			if err := c.removeNode(ctx, orphans[k]); err != nil {
				return "", err
			}
			return "removed node " + k, nil
		})
}

// reapGoneNodes is the end of a node collection: of the candidate keys,
// those missing at every pass for LeakGracePeriod (nodeGarbage) are
// reaped when a GET of their Kubernetes node (refOf) answers NotFound;
// reap says what it did, logged with the node and since when it was
// missing. A node found again is forgotten. The errors are joined.
func (c *Controller) reapGoneNodes(ctx context.Context, keys []string, refOf func(string) string,
	reap func(context.Context, string) (string, error)) error {
	var errs []error
	for _, k := range c.nodeGarbage.observe(keys, c.clock(), c.LeakGracePeriod) {
		ref := refOf(k)
		_, err := c.kube.GetNode(ctx, ref)
		switch {
		case err == nil:
			c.nodeGarbage.forget(k)
			continue
		case !errors.Is(err, k8s.ErrNotFound):
			errs = append(errs, fmt.Errorf("confirming Kubernetes node %s is gone: %w", ref, err))
			continue
		}
		did, err := reap(ctx, k)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		c.logf("kube-controllers: %s: its Kubernetes node %s has been missing from the API since %s (grace period %v) and a GET confirms it is gone",
			did, ref, c.nodeGarbage.since(k).Format(time.RFC3339), c.LeakGracePeriod)
		c.nodeGarbage.forget(k)
	}
	return errors.Join(errs...)
}

// removeNode deletes node n's Kubernetes endpoints, releases the addresses
// it allocated and its block affinities, then deletes n (compare-and-swap
// on the revision it was listed at). It stops at the first failure; the
// next pass starts over.
func (c *Controller) removeNode(ctx context.Context, n *api.Node) error {
	node := n.Metadata.Name
	weps, err := c.listK8sEndpoints(ctx)
	if err != nil {
		return err
	}
	for _, w := range weps {
		if w.Spec.Node != node {
			continue
		}
		if _, err := c.store.DeleteObject(ctx, w); err != nil && !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("node %s: deleting workloadendpoint %s/%s: %w", node, w.Metadata.Namespace, w.Metadata.Name, err)
		}
		c.logf("kube-controllers: deleted workloadendpoint %s/%s of removed node %s", w.Metadata.Namespace, w.Metadata.Name, node)
	}
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
	if _, err := c.store.DeleteObject(ctx, n); err != nil && !errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("deleting node %s: %w", node, err)
	}
	return nil
}

// releaseNodeAddrs releases every address allocated by node: by handle,
// or (without one) by address and sequence number.
func (c *Controller) releaseNodeAddrs(ctx context.Context, node string) error {
	blocks, err := c.ipam.ListBlocks(ctx)
	if err != nil {
		return fmt.Errorf("node %s: listing IPAM blocks: %w", node, err)
	}
	done := map[string]bool{}
	for _, b := range blocks {
		for _, al := range b.Allocations() {
			if al.Attrs[ipam.AttrNode] != node {
				continue
			}
			o := podOrphan{handle: al.Handle}
			if al.Handle == "" {
				seq := al.SequenceNumber
				o.addr = &ipam.ReleaseOptions{Addr: al.Addr, SequenceNumber: &seq}
			} else if done[al.Handle] {
				continue
			}
			done[al.Handle] = true
			freed, err := c.releasePodOrphan(ctx, o)
			if err != nil {
				return fmt.Errorf("node %s: %w", node, err)
			}
			c.logf("kube-controllers: released %s%s of removed node %s", o, addrList(freed), node)
		}
	}
	return nil
}

// kubeNodeNames is the set of the Kubernetes Nodes' names.
func (c *Controller) kubeNodeNames(ctx context.Context) (map[string]bool, error) {
	kns, err := c.kube.ListNodes(ctx)
	if err != nil {
		return nil, err
	}
	exists := make(map[string]bool, len(kns))
	for _, n := range kns {
		exists[n.Metadata.Name] = true
	}
	return exists, nil
}
