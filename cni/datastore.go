package cni

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"time"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/calico-aio/calico-aio/ipam"
	"github.com/calico-aio/calico-aio/store"
)

// requestTimeout bounds each datastore call of a CNI invocation.
const requestTimeout = 5 * time.Second

func (c *NetConf) storeClient() (*store.Client, error) {
	cl, err := store.New(store.Config{
		Endpoints: c.endpoints(), CAFile: c.EtcdCACertFile, CertFile: c.EtcdCertFile, KeyFile: c.EtcdKeyFile,
		DialTimeout: requestTimeout, RequestTimeout: requestTimeout,
	})
	if err != nil {
		return nil, types.NewError(types.ErrTryAgainLater, "cannot connect to the datastore", err.Error())
	}
	return cl, nil
}

// handleID is Calico's IPAM handle of a container on a network.
func handleID(network, containerID string) string { return network + "." + containerID }

// allocate hands out the pod's addresses with calico-ipam, in-process:
// the CNI_ARGS IP= addresses when given, else auto-assignment (reusing what
// the handle already holds, so a repeated ADD creates nothing new).
func allocate(ctx context.Context, al *ipam.Allocator, conf *NetConf, a Args, node, handle string, attrs map[string]string) (ipam.Assigned, error) {
	if len(a.IPs) == 0 {
		got, err := al.AutoAssign(ctx, ipam.AutoAssignArgs{
			Num4: boolToInt(conf.IPAM.AssignIPv4.or(true)), Num6: boolToInt(conf.IPAM.AssignIPv6.or(false)),
			HandleID: handle, Attrs: attrs, Node: node,
			IPv4Pools: conf.IPAM.IPv4Pools, IPv6Pools: conf.IPAM.IPv6Pools, ReuseExisting: true,
		})
		return got, ipamError(err)
	}
	if existing, err := al.IPsByHandle(ctx, handle); err == nil && len(existing) > 0 {
		got, err := al.AutoAssign(ctx, ipam.AutoAssignArgs{Num4: 1, HandleID: handle, Node: node, ReuseExisting: true})
		return got, ipamError(err)
	}
	var out ipam.Assigned
	for _, ip := range a.IPs {
		p, err := al.AssignIP(ctx, ipam.AssignIPArgs{Addr: ip, HandleID: handle, Attrs: attrs, Node: node})
		if err != nil {
			if _, rerr := al.ReleaseByHandle(ctx, handle); rerr != nil {
				slog.Error("releasing partial allocation", "handle", handle, "err", rerr)
			}
			return ipam.Assigned{}, ipamError(err)
		}
		if ip.Is4() {
			out.IPv4 = append(out.IPv4, p)
		} else {
			out.IPv6 = append(out.IPv6, p)
		}
	}
	return out, nil
}

func boolToInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// ipamError turns allocator errors into CNI errors with clear messages.
func ipamError(err error) error {
	if err == nil {
		return nil
	}
	var inUse *ipam.InUseError
	var notIn *ipam.NotInPoolError
	switch {
	case errors.Is(err, ipam.ErrNoPool):
		return types.NewError(types.ErrInvalidNetworkConfig, err.Error(), "")
	case errors.Is(err, ipam.ErrExhausted), errors.As(err, &inUse), errors.As(err, &notIn):
		return types.NewError(types.ErrInternal, err.Error(), "")
	}
	return types.NewError(types.ErrTryAgainLater, "datastore error during IP allocation", err.Error())
}

// resultIPs renders allocated prefixes for a CNI result.
func resultIPs(as ipam.Assigned) []netip.Prefix {
	return append(append([]netip.Prefix{}, as.IPv4...), as.IPv6...)
}
