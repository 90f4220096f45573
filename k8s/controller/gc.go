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
	// addrs are the allocation's addresses. When the pod exists they are
	// the reason: none of them is among its status.podIPs (an earlier pod
	// of the same name whose DEL never came, as after a node crash).
	addrs []netip.Addr
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
// every pass since and a GET of its pod then answers NotFound. So is an
// allocation whose pod exists but reports other addresses (status.podIPs):
// one left by an earlier pod of the same name, released once the GET
// still shows addresses without it. Allocations without pod attributes
// are never touched; when a list fails, nothing is
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
		live, err := c.kube.GetPod(ctx, pk.ns, pk.name)
		why := "the pod has been missing from the API since %s (grace period %v) and a GET confirms it is gone"
		switch {
		case err == nil:
			why = "the pod's addresses have not included it since %s (grace period %v) and a GET confirms it"
		case !errors.Is(err, k8s.ErrNotFound):
			errs = append(errs, fmt.Errorf("confirming pod %s is gone: %w", pk, err))
			continue
		}
		for _, k := range byPod[pk] {
			o := orphans[k]
			if live != nil && (o.wep != nil || !staleFor(*live, o.addrs)) {
				c.podGarbage.forget(k) // back (or never gone): not garbage
				continue
			}
			freed, err := c.releasePodOrphan(ctx, o)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			c.logf("kube-controllers: released %s%s of pod %s: "+why,
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
	exists := make(map[podKey]*k8s.Pod, len(pods))
	for i, p := range pods {
		exists[podKey{p.Metadata.Namespace, p.Metadata.Name}] = &pods[i]
	}
	out := map[string]podOrphan{}
	for _, w := range weps {
		if pk, _ := k8sPodOf(w); exists[pk] == nil {
			out["wep/"+w.Metadata.Namespace+"/"+w.Metadata.Name] = podOrphan{pod: pk, wep: w}
		}
	}
	allocs := map[string]podOrphan{}
	for _, b := range blocks {
		for _, al := range b.Allocations() {
			pk := podKey{al.Attrs[ipam.AttrNamespace], al.Attrs[ipam.AttrPod]}
			if pk.ns == "" || pk.name == "" {
				continue // not a pod's
			}
			k, o := "handle/"+al.Handle, podOrphan{pod: pk, handle: al.Handle}
			if al.Handle == "" {
				seq := al.SequenceNumber
				k, o = "addr/"+al.Addr.String()+"/"+strconv.FormatUint(seq, 10), podOrphan{pod: pk,
					addr: &ipam.ReleaseOptions{Addr: al.Addr, SequenceNumber: &seq}}
			}
			if prev, ok := allocs[k]; ok {
				o = prev
			}
			o.addrs = append(o.addrs, al.Addr)
			allocs[k] = o
		}
	}
	for k, o := range allocs {
		if p := exists[o.pod]; p == nil || staleFor(*p, o.addrs) {
			out[k] = o
		}
	}
	return out, nil
}

// staleFor says whether an allocation of pod p's name is not p's own: p
// reports its addresses (the kubelet sets status.podIPs once the sandbox
// is up) and none of addrs is among them. A pod reporting none yet owns
// whatever its name holds.
func staleFor(p k8s.Pod, addrs []netip.Addr) bool {
	var ips []string
	for _, ip := range p.Status.PodIPs {
		ips = append(ips, ip.IP)
	}
	if len(ips) == 0 && p.Status.PodIP != "" {
		ips = []string{p.Status.PodIP}
	}
	if len(ips) == 0 {
		return false
	}
	for _, ip := range ips {
		a, err := netip.ParseAddr(ip)
		if err == nil && slices.Contains(addrs, a.Unmap()) {
			return false
		}
	}
	return true
}

// releasePodOrphan releases one orphan: the endpoint by compare-and-swap
// on the revision it was seen at, the handle's addresses, or the one
// address if still held by the same allocation. It returns the addresses
// freed.
func (c *Controller) releasePodOrphan(ctx context.Context, o podOrphan) ([]netip.Addr, error) {
	switch {
	case o.wep != nil:
		_, err := c.store.DeleteObject(ctx, o.wep)
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
