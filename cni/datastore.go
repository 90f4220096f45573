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
	"github.com/calico-aio/calico-aio/store/apiconfig"
)

// requestTimeout bounds each datastore call of a CNI invocation.
const requestTimeout = 5 * time.Second

// apiNetConf is the netconf's datastore keys, as store/apiconfig reads them.
func (c *NetConf) apiNetConf() apiconfig.NetConf {
	return apiconfig.NetConf{
		DatastoreType: c.DatastoreType, EtcdEndpoints: c.EtcdEndpoints, EtcdDiscoverySrv: c.EtcdDiscoverySrv,
		EtcdKeyFile: c.EtcdKeyFile, EtcdCertFile: c.EtcdCertFile, EtcdCACertFile: c.EtcdCACertFile,
		Kubeconfig: c.Kubernetes.Kubeconfig, K8sAPIRoot: c.Kubernetes.K8sAPIRoot,
		PolicyK8sAPIRoot: c.Policy.K8sAPIRoot, PolicyK8sAuthToken: c.Policy.K8sAuthToken,
		PolicyK8sClientCertificate: c.Policy.K8sClientCertificate, PolicyK8sClientKey: c.Policy.K8sClientKey,
		PolicyK8sCertificateAuthority: c.Policy.K8sCertificateAuthority,
	}
}

// datastore resolves the plugin's datastore as Calico's plugin does: the
// netconf's keys over the environment (getenv). A bad setting is CNI
// error 7 naming the key or variable.
func (c *NetConf) datastore(getenv func(string) string) (*apiconfig.Config, error) {
	h := apiconfig.OSHost()
	h.Getenv = getenv
	ds, err := apiconfig.FromNetConf(h, c.apiNetConf())
	if err != nil {
		return nil, types.NewError(types.ErrInvalidNetworkConfig, "invalid network config: "+err.Error(), "")
	}
	for _, w := range ds.Warnings {
		slog.Warn("datastore setting not used", "warning", w)
	}
	return ds, nil
}

// storeClient connects to the datastore ds names, each call bounded by
// requestTimeout: etcd, or the Kubernetes API (cni/kdd.go).
func storeClient(ds *apiconfig.Config) (*store.Client, error) {
	cfg := *ds
	cfg.Etcd.DialTimeout, cfg.Etcd.RequestTimeout = requestTimeout, requestTimeout
	cl, err := apiconfig.Open(&cfg, apiconfig.OSHost())
	switch {
	case err != nil:
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
