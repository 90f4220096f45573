package controller

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/calico-aio/calico-aio/ipam"
	"github.com/calico-aio/calico-aio/k8s"
	"github.com/calico-aio/calico-aio/store"
	"github.com/calico-aio/calico-aio/store/api"
)

// podOrphan is a deleted pod's leftover: its endpoint, or the addresses of
// one of its IPAM handles (or, without a handle, one address).
type podOrphan struct {
	pod    podKey
	wep    *api.WorkloadEndpoint
	handle string
	addr   *ipam.ReleaseOptions
}

func (o podOrphan) String() string {
	switch {
	case o.wep != nil:
		return "workloadendpoint " + o.wep.Metadata.Namespace + "/" + o.wep.Metadata.Name
	case o.handle != "":
		return "IPAM handle " + o.handle
	}
	return "address " + o.addr.Addr.String()
}

// collectPods releases what deleted pods left behind: Kubernetes workload
// endpoints whose pod is not in the API, and IPAM allocations whose
// attributes name such a pod. Each becomes a candidate when first seen
// and is released only once it has been orphaned for LeakGracePeriod at
// every pass since and a GET of its pod then answers NotFound. Allocations
// without pod attributes are never touched; when a list fails, nothing is
// released (and the candidates are left as they are).
func (c *Controller) collectPods(ctx context.Context) error {
	if c.LeakGracePeriod <= 0 {
		return nil
	}
	orphans, err := c.podOrphans(ctx)
	if err != nil {
		return err
	}
	keys := make([]string, 0, len(orphans))
	for k := range orphans {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	due := c.podGarbage.observe(keys, c.clock(), c.LeakGracePeriod)

	byPod := map[podKey][]string{}
	var pods []podKey
	for _, k := range due {
		pk := orphans[k].pod
		if byPod[pk] == nil {
			pods = append(pods, pk)
		}
		byPod[pk] = append(byPod[pk], k)
	}
	var errs []error
	for _, pk := range pods {
		_, err := c.kube.GetPod(ctx, pk.ns, pk.name)
		switch {
		case err == nil: // back (or never gone): not garbage
			for _, k := range byPod[pk] {
				c.podGarbage.forget(k)
			}
			continue
		case !errors.Is(err, k8s.ErrNotFound):
			errs = append(errs, fmt.Errorf("confirming pod %s is gone: %w", pk, err))
			continue
		}
		for _, k := range byPod[pk] {
			o := orphans[k]
			freed, err := c.releasePodOrphan(ctx, o)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			c.logf("kube-controllers: released %s%s of pod %s: the pod has been missing from the API since %s (grace period %v) and a GET confirms it is gone",
				o, addrList(freed), pk, c.podGarbage.since(k).Format(time.RFC3339), c.LeakGracePeriod)
			c.podGarbage.forget(k)
		}
	}
	return errors.Join(errs...)
}

// podOrphans reads the candidates: the datastore first, then the pods, so
// that everything read was written before the pod list was taken (the CNI
// plugin writes only for a pod it has read from the API).
func (c *Controller) podOrphans(ctx context.Context) (map[string]podOrphan, error) {
	weps, err := c.listK8sEndpoints(ctx)
	if err != nil {
		return nil, err
	}
	blocks, err := c.ipam.ListBlocks(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing IPAM blocks: %w", err)
	}
	pods, err := c.kube.ListPods(ctx)
	if err != nil {
		return nil, err
	}
	exists := make(map[podKey]bool, len(pods))
	for _, p := range pods {
		exists[podKey{p.Metadata.Namespace, p.Metadata.Name}] = true
	}
	out := map[string]podOrphan{}
	for _, w := range weps {
		if pk, _ := k8sPodOf(w); !exists[pk] {
			out["wep/"+w.Metadata.Namespace+"/"+w.Metadata.Name] = podOrphan{pod: pk, wep: w}
		}
	}
	for _, b := range blocks {
		for _, al := range b.Allocations() {
			pk := podKey{al.Attrs[ipam.AttrNamespace], al.Attrs[ipam.AttrPod]}
			if pk.ns == "" || pk.name == "" || exists[pk] {
				continue // not a pod's, or the pod's still there
			}
			if al.Handle != "" {
				out["handle/"+al.Handle] = podOrphan{pod: pk, handle: al.Handle}
				continue
			}
			seq := al.SequenceNumber
			out["addr/"+al.Addr.String()+"/"+strconv.FormatUint(seq, 10)] = podOrphan{pod: pk,
				addr: &ipam.ReleaseOptions{Addr: al.Addr, SequenceNumber: &seq}}
		}
	}
	return out, nil
}

// releasePodOrphan releases one orphan: the endpoint by compare-and-swap
// on the revision it was seen at, the handle's addresses, or the one
// address if still held by the same allocation. It returns the addresses
// freed.
func (c *Controller) releasePodOrphan(ctx context.Context, o podOrphan) ([]netip.Addr, error) {
	switch {
	case o.wep != nil:
		m := o.wep.Metadata
		_, err := c.store.DeleteResource(ctx, wepKind, m.Namespace, m.Name, revision(o.wep))
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return nil, fmt.Errorf("deleting %s: %w", o, err)
		}
		return nil, nil
	case o.handle != "":
		freed, err := c.ipam.ReleaseByHandle(ctx, o.handle)
		if err != nil {
			return nil, fmt.Errorf("releasing %s: %w", o, err)
		}
		return freed, nil
	}
	missed, err := c.ipam.ReleaseIPs(ctx, []ipam.ReleaseOptions{*o.addr})
	if err != nil {
		return nil, fmt.Errorf("releasing %s: %w", o, err)
	}
	if len(missed) > 0 {
		return nil, nil // reallocated meanwhile: not ours to free
	}
	return []netip.Addr{o.addr.Addr}, nil
}

// addrList is " (a, b)" for the addresses, "" for none.
func addrList(addrs []netip.Addr) string {
	if len(addrs) == 0 {
		return ""
	}
	s := make([]string, len(addrs))
	for i, a := range addrs {
		s[i] = a.String()
	}
	return " (" + strings.Join(s, ", ") + ")"
}
