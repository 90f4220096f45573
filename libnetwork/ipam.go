package libnetwork

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/netip"
	"slices"
	"strings"

	"github.com/calico-aio/calico-aio/ipam"
	"github.com/calico-aio/calico-aio/store"
	"github.com/calico-aio/calico-aio/store/api"
)

// The IPAM driver hands out addresses from Calico's IP pools with the
// same allocator as the CNI plugin. Docker asks for an address before it
// creates the endpoint and does not say for which endpoint, so each
// address gets its own handle, "libnetwork.<random>", and is released by
// address; a release only frees an address a libnetwork handle holds.

// handlePrefix starts the IPAM handle of every address the driver hands out.
const handlePrefix = "libnetwork."

// gatewayKey is the pool Data key with the network's gateway.
const gatewayKey = "com.docker.network.gateway"

// anyPool is the dummy pool (and gateway) of a family: a network without
// a subnet, whose addresses come from any Calico pool.
func anyPool(v6 bool) (id, cidr string) {
	if v6 {
		return PoolIDv6, "::/0"
	}
	return PoolIDv4, "0.0.0.0/0"
}

func (d *driver) ipamRoutes(m *http.ServeMux) {
	m.Handle("/IpamDriver.GetCapabilities", call(func(context.Context, *Empty) (*IPAMCapabilitiesResponse, error) {
		return &IPAMCapabilitiesResponse{}, nil
	}))
	m.Handle("/IpamDriver.GetDefaultAddressSpaces", call(func(context.Context, *Empty) (*AddressSpacesResponse, error) {
		return &AddressSpacesResponse{LocalDefaultAddressSpace: LocalAddressSpace, GlobalDefaultAddressSpace: GlobalAddressSpace}, nil
	}))
	m.Handle("/IpamDriver.RequestPool", call(d.requestPool))
	m.Handle("/IpamDriver.ReleasePool", call(func(context.Context, *ReleasePoolRequest) (*Empty, error) { return empty() }))
	m.Handle("/IpamDriver.RequestAddress", call(d.requestAddress))
	m.Handle("/IpamDriver.ReleaseAddress", call(d.releaseAddress))
	m.Handle("/IpamDriver.DiscoverNew", call(discovery))
	m.Handle("/IpamDriver.DiscoverDelete", call(discovery))
}

func discovery(context.Context, *DiscoveryNotification) (*Empty, error) { return empty() }

// requestPool answers with the dummy pool, or with the Calico pool the
// network's --subnet names. Either way Data carries a dummy gateway so
// that Docker asks for no gateway address.
func (d *driver) requestPool(ctx context.Context, req *RequestPoolRequest) (*RequestPoolResponse, error) {
	if req.SubPool != "" {
		return nil, fmt.Errorf("Calico IPAM does not support sub-pools (--ip-range %s): addresses come from the Calico IP pool", req.SubPool)
	}
	if len(req.Options) != 0 {
		return nil, fmt.Errorf("Calico IPAM takes no options (--ipam-opt), got %s", strings.Join(slices.Sorted(maps.Keys(req.Options)), ", "))
	}
	id, cidr := anyPool(req.V6)
	if req.Pool == "" {
		_, gw := anyPool(req.V6)
		return &RequestPoolResponse{PoolID: id, Pool: cidr, Data: map[string]string{gatewayKey: gw}}, nil
	}
	want, err := netip.ParsePrefix(req.Pool)
	if err != nil {
		return nil, fmt.Errorf("subnet %q is not a CIDR", req.Pool)
	}
	want = want.Masked()
	pools, err := d.pools(ctx)
	if err != nil {
		return nil, err
	}
	for _, p := range pools {
		if pr, err := p.Prefix(); err == nil && pr.Masked() == want {
			if p.Spec.Disabled {
				return nil, fmt.Errorf("Calico IP pool %s (%s) is disabled", p.Metadata.Name, want)
			}
			_, gw := anyPool(want.Addr().Is6())
			return &RequestPoolResponse{PoolID: want.String(), Pool: want.String(), Data: map[string]string{gatewayKey: gw}}, nil
		}
	}
	return nil, fmt.Errorf("subnet %s must be the CIDR of a Calico IP pool", want)
}

func (d *driver) pools(ctx context.Context) ([]*api.IPPool, error) {
	k, _ := api.LookupKind("IPPool")
	objs, _, err := d.store.ListResources(ctx, k, "")
	if err != nil {
		return nil, fmt.Errorf("listing IP pools: %w", err)
	}
	out := make([]*api.IPPool, 0, len(objs))
	for _, o := range objs {
		p := o.(*api.IPPool)
		p.Default()
		out = append(out, p)
	}
	return out, nil
}

// poolOf says which family a pool ID stands for and which Calico pools
// (none: any) its addresses come from.
func poolOf(id string) (v6 bool, pools []string, err error) {
	switch id {
	case PoolIDv4:
		return false, nil, nil
	case PoolIDv6:
		return true, nil, nil
	}
	p, err := netip.ParsePrefix(id)
	if err != nil {
		return false, nil, fmt.Errorf("unknown pool ID %q", id)
	}
	return p.Addr().Is6(), []string{p.Masked().String()}, nil
}

// requestAddress allocates one address: any free one of the pool, or the
// one asked for (docker run --ip). A gateway request gets the dummy
// gateway and allocates nothing.
func (d *driver) requestAddress(ctx context.Context, req *RequestAddressRequest) (*RequestAddressResponse, error) {
	v6, pools, err := poolOf(req.PoolID)
	if err != nil {
		return nil, err
	}
	if req.Options[GatewayOption] == GatewayRequest {
		if req.Address != "" {
			return nil, fmt.Errorf("Calico IPAM does not support a gateway address (--gateway %s): containers route via 169.254.1.1", req.Address)
		}
		_, gw := anyPool(v6)
		return &RequestAddressResponse{Address: gw}, nil
	}
	handle, err := newHandle()
	if err != nil {
		return nil, err
	}
	var addr netip.Addr
	if req.Address == "" {
		args := ipam.AutoAssignArgs{HandleID: handle, Node: d.cfg.Node}
		if v6 {
			args.Num6, args.IPv6Pools = 1, pools
		} else {
			args.Num4, args.IPv4Pools = 1, pools
		}
		got, err := d.ipam.AutoAssign(ctx, args)
		if err != nil {
			return nil, fmt.Errorf("assigning an address from %s: %w", req.PoolID, err)
		}
		if addrs := got.Addrs(); len(addrs) == 1 {
			addr = addrs[0]
		} else {
			return nil, fmt.Errorf("assigning an address from %s: got %v", req.PoolID, addrs)
		}
	} else {
		if addr, err = parseAddr(req.Address); err != nil {
			return nil, err
		}
		if addr.Is6() != v6 {
			return nil, fmt.Errorf("address %s is not of the family of pool %s", addr, req.PoolID)
		}
		if _, err := d.ipam.AssignIP(ctx, ipam.AssignIPArgs{Addr: addr, HandleID: handle, Node: d.cfg.Node}); err != nil {
			return nil, fmt.Errorf("assigning %s: %w", addr, err)
		}
	}
	return &RequestAddressResponse{Address: netip.PrefixFrom(addr, addr.BitLen()).String()}, nil
}

func newHandle() (string, error) {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return handlePrefix + hex.EncodeToString(b[:]), nil
}

// parseAddr takes an address as Docker writes it: plain or in CIDR form.
func parseAddr(s string) (netip.Addr, error) {
	if p, err := netip.ParsePrefix(s); err == nil {
		return p.Addr(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("%q is not an IP address", s)
	}
	return a.Unmap(), nil
}

// releaseAddress frees an address the driver handed out. An address that
// is free already is done; the dummy gateway, which Docker releases when a
// network goes, was never allocated.
func (d *driver) releaseAddress(ctx context.Context, req *ReleaseAddressRequest) (*Empty, error) {
	addr, err := parseAddr(req.Address)
	if err != nil {
		return nil, err
	}
	if addr.IsUnspecified() {
		return empty()
	}
	al, err := d.holder(ctx, addr)
	if err != nil {
		return nil, fmt.Errorf("releasing %s: %w", addr, err)
	}
	if al == nil {
		return empty()
	}
	if !strings.HasPrefix(al.Handle, handlePrefix) {
		return nil, fmt.Errorf("address %s is held by handle %q, not by a Docker endpoint: not releasing it", addr, al.Handle)
	}
	seq := al.SequenceNumber
	if _, err := d.ipam.ReleaseIPs(ctx, []ipam.ReleaseOptions{{Addr: addr, Handle: al.Handle, SequenceNumber: &seq}}); err != nil {
		return nil, fmt.Errorf("releasing %s: %w", addr, err)
	}
	return empty()
}

// holder finds the allocation of addr (nil when it is free): one read of
// its block, found from its pool's block size, or (pool gone) a scan.
func (d *driver) holder(ctx context.Context, addr netip.Addr) (*ipam.Allocation, error) {
	pools, err := d.pools(ctx)
	if err != nil {
		return nil, err
	}
	var blocks []ipam.BlockInfo
	for _, p := range pools {
		if pr, err := p.Prefix(); err == nil && pr.Contains(addr) {
			cidr, _ := addr.Prefix(p.Spec.BlockSize)
			kv, err := d.store.Get(ctx, store.Key{Kind: store.KindIPAMBlock, Name: cidr.String()})
			if errors.Is(err, store.ErrNotFound) {
				return nil, nil
			}
			if err != nil {
				return nil, err
			}
			var b ipam.Block
			if err := json.Unmarshal(kv.Value, &b); err != nil {
				return nil, fmt.Errorf("block %s: %w", cidr, err)
			}
			blocks = []ipam.BlockInfo{{Prefix: cidr, Block: &b}}
			break
		}
	}
	if blocks == nil {
		if blocks, err = d.ipam.ListBlocks(ctx); err != nil {
			return nil, err
		}
	}
	for _, b := range blocks {
		if !b.Prefix.Contains(addr) {
			continue
		}
		for _, al := range b.Allocations() {
			if al.Addr == addr {
				return &al, nil
			}
		}
	}
	return nil, nil
}
