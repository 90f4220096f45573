package calicoipam

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"slices"

	"github.com/calico-aio/calico-aio/store/kdd"
	"github.com/calico-aio/calico-aio/store/selector"
)

// checkReady reads ClusterInformation default and refuses, with Calico's
// messages, when it is missing or the datastore is not ready.
func (d *Double) checkReady(ctx context.Context) error {
	var ci clusterInformation
	err := d.conn.get(ctx, clusterInformationPath(), &ci)
	var apiErr *APIError
	if errors.As(err, &apiErr) && errors.Is(err, ErrNotFound) {
		return textError{"error getting ClusterInformation: resource does not exist: ClusterInformation(default) with error: " + apiErr.Message, err}
	}
	if err != nil {
		return fmt.Errorf("error getting ClusterInformation: %w", err)
	}
	// An unset datastoreReady is taken as not ready (not recorded).
	if ci.Spec.DatastoreReady == nil || !*ci.Spec.DatastoreReady {
		return ErrNotReady
	}
	return nil
}

// textError is an error with Calico's exact text that still unwraps to
// its cause.
type textError struct {
	text  string
	cause error
}

func (e textError) Error() string { return e.text }
func (e textError) Unwrap() error { return e.cause }

// readPod reads the pod and its namespace twice, as the CNI plugin and then
// calico-ipam do. It returns nil when the pod does not exist.
func (d *Double) readPod(ctx context.Context, p Pod) (*k8sObject, error) {
	var pod *k8sObject
	for range 2 {
		var err error
		if pod, err = d.getPod(ctx, p); err != nil {
			return nil, err
		}
		if err := d.conn.get(ctx, coreAPI+"/namespaces/"+p.Namespace, nil); err != nil && !errors.Is(err, ErrNotFound) {
			return nil, err
		}
	}
	return pod, nil
}

// getPod is the pod, or nil when it does not exist.
func (d *Double) getPod(ctx context.Context, p Pod) (*k8sObject, error) {
	var pod k8sObject
	err := d.conn.get(ctx, podPath(p.Namespace, p.Name), &pod)
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &pod, nil
}

// pool is an IPv4 pool the node may allocate from.
type pool struct {
	cidr      netip.Prefix
	blockBits int
}

// env is what an Assign reads before it allocates.
type env struct {
	reserved []netip.Prefix
	pools    []pool
}

func (e env) isReserved(a netip.Addr) bool {
	return slices.ContainsFunc(e.reserved, func(p netip.Prefix) bool { return p.Contains(a) })
}

// inPool is true when cidr lies in one of the pools.
func (e env) inPool(cidr netip.Prefix) bool {
	return slices.ContainsFunc(e.pools, func(p pool) bool { return p.cidr.Contains(cidr.Addr()) })
}

// readEnv lists the reservations, reads the node and lists the pools the
// node may use: IPv4, enabled, for workloads, assigned automatically and
// with a nodeSelector matching the node's labels.
func (d *Double) readEnv(ctx context.Context, node string) (env, error) {
	var e env
	var reservations struct{ Items []ipReservation }
	if err := d.conn.list(ctx, crdAPI+"/ipreservations", nil, &reservations); err != nil {
		return e, err
	}
	for _, r := range reservations.Items {
		for _, s := range r.Spec.ReservedCIDRs {
			p, err := parseCIDR(s)
			if err != nil {
				return e, fmt.Errorf("IPReservation: %w", err)
			}
			e.reserved = append(e.reserved, p)
		}
	}
	labels, err := d.nodeLabels(ctx, node)
	if err != nil {
		return e, err
	}
	var pools struct{ Items []ipPool }
	if err := d.conn.list(ctx, crdAPI+"/ippools", nil, &pools); err != nil {
		return e, err
	}
	for _, ip := range pools.Items {
		p, ok, err := usablePool(ip, labels)
		if err != nil {
			return e, err
		}
		if ok {
			e.pools = append(e.pools, p)
		}
	}
	return e, nil
}

// nodeLabels are the Kubernetes Node's labels (none when it does not exist).
func (d *Double) nodeLabels(ctx context.Context, node string) (map[string]string, error) {
	var n k8sObject
	err := d.conn.get(ctx, coreAPI+"/nodes/"+node, &n)
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	return n.Metadata.Labels, err
}

// usablePool converts an IPPool the node may allocate IPv4 pod addresses from.
func usablePool(ip ipPool, nodeLabels map[string]string) (pool, bool, error) {
	s := ip.Spec
	cidr, err := parseCIDR(s.CIDR)
	if err != nil {
		return pool{}, false, fmt.Errorf("IPPool %s: %w", ip.Metadata.Name, err)
	}
	if !cidr.Addr().Is4() || s.Disabled || s.AssignmentMode != "" && s.AssignmentMode != "Automatic" ||
		len(s.AllowedUses) > 0 && !slices.Contains(s.AllowedUses, "Workload") {
		return pool{}, false, nil
	}
	sel, err := selector.Parse(s.NodeSelector)
	if err != nil {
		return pool{}, false, fmt.Errorf("IPPool %s nodeSelector: %w", ip.Metadata.Name, err)
	}
	bits := s.BlockSize
	if bits == 0 {
		bits = 26
	}
	if bits < cidr.Bits() || bits > 32 {
		return pool{}, false, fmt.Errorf("IPPool %s: blockSize %d does not fit %s", ip.Metadata.Name, bits, cidr)
	}
	return pool{cidr: cidr, blockBits: bits}, sel.Evaluate(nodeLabels), nil
}

func parseCIDR(s string) (netip.Prefix, error) {
	if p, err := netip.ParsePrefix(s); err == nil {
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%q is not a CIDR or an address", s)
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// listAffinities lists the node's IPv4 block affinities by Calico's labels.
func (d *Double) listAffinities(ctx context.Context, node string) ([]blockAffinity, error) {
	var list struct{ Items []blockAffinity }
	q := url.Values{"labelSelector": {affinitySelector(node)}}
	if err := d.conn.list(ctx, crdAPI+"/blockaffinities", q, &list); err != nil {
		return nil, err
	}
	return list.Items, nil
}

// ipamConfig reads IPAMConfig default, creating Calico's default first
// when there is none.
func (d *Double) ipamConfig(ctx context.Context) (ipamConfigSpec, error) {
	var c ipamConfig
	err := d.conn.get(ctx, ipamConfigPath(), &c)
	if errors.Is(err, ErrNotFound) {
		def := ipamConfig{typeMeta: typeMeta{apiVersion, "IPAMConfig"}, Metadata: ipamMeta(kdd.IPAMConfigName, nil, "", ""),
			Spec: ipamConfigSpec{AutoAllocateBlocks: true, KubeVirtVMAddressPersistence: "Enabled"}}
		if err := d.conn.create(ctx, crdAPI+"/ipamconfigs", def, nil); err != nil && !errors.Is(err, ErrAlreadyExists) {
			return c.Spec, err
		}
		err = d.conn.get(ctx, ipamConfigPath(), &c)
	}
	return c.Spec, err
}
