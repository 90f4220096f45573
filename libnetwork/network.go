package libnetwork

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"

	"github.com/calico-aio/calico-aio/store"
)

// The network driver. Docker's order for "docker run --net net1" is
// RequestAddress, CreateEndpoint, Join, ProgramExternalConnectivity; on
// stop RevokeExternalConnectivity, Leave, DeleteEndpoint, ReleaseAddress.
// CreateEndpoint writes the WorkloadEndpoint, Join makes the veth pair,
// Leave and DeleteEndpoint remove them; every step may be repeated.

// The "169.254.1.1 trick": the container's gateway is a link-local
// address nobody owns; the host veth answers ARP for it by proxy ARP.
const (
	gatewayV4 = "169.254.1.1"
	// gatewayV6 is the EUI-64 link-local address of a veth with hostMAC.
	gatewayV6 = "fe80::ecee:eeff:feee:eeee"
)

func (d *driver) networkRoutes(m *http.ServeMux) {
	m.Handle("/NetworkDriver.GetCapabilities", call(func(context.Context, *Empty) (*CapabilitiesResponse, error) {
		return &CapabilitiesResponse{Scope: "local"}, nil
	}))
	m.Handle("/NetworkDriver.CreateNetwork", call(d.createNetwork))
	m.Handle("/NetworkDriver.DeleteNetwork", call(func(_ context.Context, req *NetworkRequest) (*Empty, error) {
		d.forgetNetwork(req.NetworkID)
		return empty()
	}))
	m.Handle("/NetworkDriver.CreateEndpoint", call(d.createEndpoint))
	m.Handle("/NetworkDriver.DeleteEndpoint", call(d.deleteEndpoint))
	m.Handle("/NetworkDriver.EndpointOperInfo", call(d.endpointInfo))
	m.Handle("/NetworkDriver.Join", call(d.join))
	m.Handle("/NetworkDriver.Leave", call(d.leave))
	m.Handle("/NetworkDriver.DiscoverNew", call(discovery))
	m.Handle("/NetworkDriver.DiscoverDelete", call(discovery))
	noop := call(func(context.Context, *EndpointRequest) (*Empty, error) { return empty() })
	m.Handle("/NetworkDriver.ProgramExternalConnectivity", noop)
	m.Handle("/NetworkDriver.RevokeExternalConnectivity", noop)
}

// createNetwork accepts networks whose addresses come from Calico IPAM;
// the datastore needs nothing until an endpoint joins.
func (d *driver) createNetwork(_ context.Context, req *CreateNetworkRequest) (*Empty, error) {
	if !idRe().MatchString(req.NetworkID) {
		return nil, fmt.Errorf("NetworkID %q is not a Docker network ID", req.NetworkID)
	}
	if internal, _ := req.Options["com.docker.network.internal"].(bool); internal {
		return nil, errors.New("the Calico driver does not support --internal networks: use a Calico policy to cut egress")
	}
	for _, data := range [][]IPAMData{req.IPv4Data, req.IPv6Data} {
		for _, p := range data {
			pr, err := netip.ParsePrefix(p.Pool)
			if err != nil {
				return nil, fmt.Errorf("pool %q is not a CIDR", p.Pool)
			}
			if _, gw := anyPool(pr.Addr().Is6()); p.Gateway != gw && p.AddressSpace != LocalAddressSpace && p.AddressSpace != GlobalAddressSpace {
				return nil, fmt.Errorf("pool %s (address space %q, gateway %q) is not from Calico IPAM: create the network with --ipam-driver calico-ipam", p.Pool, p.AddressSpace, p.Gateway)
			}
		}
	}
	return empty()
}

// createEndpoint writes the container's WorkloadEndpoint, with the
// network's profile (created when missing).
func (d *driver) createEndpoint(ctx context.Context, req *CreateEndpointRequest) (*CreateEndpointResponse, error) {
	if err := checkIDs(req.NetworkID, req.EndpointID); err != nil {
		return nil, err
	}
	in := req.Interface
	if in == nil || (in.Address == "" && in.AddressIPv6 == "") {
		return nil, errors.New("the endpoint has no address: the network must use Calico IPAM (--ipam-driver calico-ipam)")
	}
	var addrs []netip.Addr
	for _, s := range []string{in.Address, in.AddressIPv6} {
		if s == "" {
			continue
		}
		a, err := parseAddr(s)
		if err != nil {
			return nil, err
		}
		addrs = append(addrs, a)
	}
	resp := &CreateEndpointResponse{}
	mac := containerMAC(req.EndpointID)
	if in.MacAddress != "" {
		m, err := net.ParseMAC(in.MacAddress)
		if err != nil {
			return nil, fmt.Errorf("MAC address %q: %w", in.MacAddress, err)
		}
		mac = m
	} else {
		resp.Interface = &EndpointInterface{MacAddress: mac.String()}
	}
	var profiles []string
	if !d.cfg.NoProfiles {
		name, err := d.networkName(ctx, req.NetworkID)
		if err != nil {
			return nil, err
		}
		if err := d.ensureProfile(ctx, name); err != nil {
			return nil, err
		}
		profiles = []string{name}
	}
	host, err := d.recordHost(ctx, req.EndpointID)
	if err != nil {
		return nil, err
	}
	w := d.buildEndpoint(req.EndpointID, host, addrs, mac, profiles)
	if _, err := d.store.ApplyResource(ctx, w); err != nil {
		return nil, fmt.Errorf("writing WorkloadEndpoint %s/%s: %w", w.Metadata.Namespace, w.Metadata.Name, err)
	}
	return resp, nil
}

// deleteEndpoint removes the veth (if Leave did not) and the
// WorkloadEndpoint; both may be gone already.
func (d *driver) deleteEndpoint(ctx context.Context, req *EndpointRequest) (*Empty, error) {
	if err := checkIDs(req.NetworkID, req.EndpointID); err != nil {
		return nil, err
	}
	if err := d.removeVeth(ctx, req.EndpointID); err != nil {
		return nil, err
	}
	name := d.endpointName(req.EndpointID)
	if _, err := d.store.DeleteResource(ctx, wepKind, Orchestrator, name, ""); err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("deleting WorkloadEndpoint %s/%s: %w", Orchestrator, name, err)
	}
	return empty()
}

func (d *driver) endpointInfo(ctx context.Context, req *EndpointRequest) (*InfoResponse, error) {
	if err := checkIDs(req.NetworkID, req.EndpointID); err != nil {
		return nil, err
	}
	w, err := d.endpoint(ctx, req.EndpointID)
	if err != nil {
		return nil, err
	}
	return &InfoResponse{Value: map[string]any{
		"WorkloadEndpoint": w.Metadata.Namespace + "/" + w.Metadata.Name,
		"HostInterface":    w.Spec.InterfaceName,
	}}, nil
}

// join makes the veth pair and answers with the end Docker moves into the
// container and the routes it adds there: the gateway on-link, then the
// default route through it.
func (d *driver) join(ctx context.Context, req *JoinRequest) (*JoinResponse, error) {
	if err := checkIDs(req.NetworkID, req.EndpointID); err != nil {
		return nil, err
	}
	w, err := d.endpoint(ctx, req.EndpointID)
	if err != nil {
		return nil, err
	}
	mac, err := net.ParseMAC(w.Spec.MAC)
	if err != nil {
		mac = containerMAC(req.EndpointID)
	}
	iface, err := d.hostIface(ctx, req.EndpointID)
	if err != nil {
		return nil, err
	}
	v := vethSpec{iface: iface, mac: mac, mtu: d.cfg.MTU, addrs: endpointAddrs(w)}
	host, err := d.kern.addVeth(v)
	if err != nil {
		return nil, fmt.Errorf("wiring endpoint %s: %w", req.EndpointID, err)
	}
	if host != w.Spec.InterfaceName {
		// The recorded name was taken on the host: record the one chosen.
		w.Spec.InterfaceName = host
		if _, err := d.store.UpdateResource(ctx, w); err != nil {
			_ = d.kern.delVeth(host)
			return nil, fmt.Errorf("recording host interface %s in WorkloadEndpoint %s/%s: %w", host, w.Metadata.Namespace, w.Metadata.Name, err)
		}
	}
	resp := &JoinResponse{InterfaceName: InterfaceName{SrcName: tempName(host), DstPrefix: d.cfg.IfPrefix}}
	if v.has4() {
		resp.Gateway = gatewayV4
		resp.StaticRoutes = append(resp.StaticRoutes, StaticRoute{Destination: gatewayV4 + "/32", RouteType: routeConnected})
	}
	if v.has6() {
		resp.GatewayIPv6 = gatewayV6
		resp.StaticRoutes = append(resp.StaticRoutes, StaticRoute{Destination: gatewayV6 + "/128", RouteType: routeConnected})
	}
	return resp, nil
}

// leave removes the veth pair (with it the host routes); the end in the
// container goes with it.
func (d *driver) leave(ctx context.Context, req *EndpointRequest) (*Empty, error) {
	if err := checkIDs(req.NetworkID, req.EndpointID); err != nil {
		return nil, err
	}
	if err := d.removeVeth(ctx, req.EndpointID); err != nil {
		return nil, err
	}
	return empty()
}

// removeVeth removes the veth pair the endpoint records. Without the
// endpoint nothing is removed: the interface may be another workload's,
// and a pair left on the host is replaced by the next Join choosing its
// name (see cni.HostIface).
func (d *driver) removeVeth(ctx context.Context, endpointID string) error {
	w, err := d.endpoint(ctx, endpointID)
	if err != nil {
		var none *noEndpointError
		if errors.As(err, &none) {
			return nil
		}
		return err
	}
	if w.Spec.InterfaceName == "" {
		return nil
	}
	return d.kern.delVeth(w.Spec.InterfaceName)
}
