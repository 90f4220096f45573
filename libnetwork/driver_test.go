package libnetwork

import (
	"context"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/calico-aio/calico-aio/ipam"
	"github.com/calico-aio/calico-aio/store/api"
)

// Docker's calls for "docker network create --ipv6 -d calico --ipam-driver
// calico-ipam net1", "docker run --net net1" and their removal, in
// Docker's order: the driver writes the endpoint, profile, allocations and
// veth, and removes all but the profile.
func TestDockerSequence(t *testing.T) {
	e := newEnv(t, nil)
	e.pool("v4", "10.70.0.0/24")
	e.pool("v6", "fd00:70::/64")
	e.netNames[netID] = "net1"

	var act ActivateResponse
	e.call("/Plugin.Activate", "", &act)
	if !reflect.DeepEqual(act.Implements, []string{"NetworkDriver", "IpamDriver"}) {
		t.Errorf("Implements = %v", act.Implements)
	}
	var ipamCaps IPAMCapabilitiesResponse
	e.call("/IpamDriver.GetCapabilities", "", &ipamCaps)
	var spaces AddressSpacesResponse
	e.call("/IpamDriver.GetDefaultAddressSpaces", "", &spaces)
	if spaces != (AddressSpacesResponse{LocalAddressSpace, GlobalAddressSpace}) {
		t.Errorf("address spaces = %+v", spaces)
	}
	var caps CapabilitiesResponse
	e.call("/NetworkDriver.GetCapabilities", "", &caps)
	if caps.Scope != "local" {
		t.Errorf("scope = %q", caps.Scope)
	}

	// docker network create
	var p4, p6 RequestPoolResponse
	e.call("/IpamDriver.RequestPool", RequestPoolRequest{AddressSpace: LocalAddressSpace}, &p4)
	e.call("/IpamDriver.RequestPool", RequestPoolRequest{AddressSpace: LocalAddressSpace, V6: true}, &p6)
	if p4.PoolID != PoolIDv4 || p4.Pool != "0.0.0.0/0" || p4.Data[gatewayKey] != "0.0.0.0/0" {
		t.Errorf("v4 pool = %+v", p4)
	}
	if p6.PoolID != PoolIDv6 || p6.Pool != "::/0" || p6.Data[gatewayKey] != "::/0" {
		t.Errorf("v6 pool = %+v", p6)
	}
	e.call("/NetworkDriver.CreateNetwork", CreateNetworkRequest{NetworkID: netID,
		Options:  map[string]any{"com.docker.network.enable_ipv6": true, "com.docker.network.generic": map[string]any{}},
		IPv4Data: []IPAMData{{AddressSpace: LocalAddressSpace, Pool: p4.Pool, Gateway: p4.Data[gatewayKey]}},
		IPv6Data: []IPAMData{{AddressSpace: LocalAddressSpace, Pool: p6.Pool, Gateway: p6.Data[gatewayKey]}}}, nil)

	// docker run
	var a4, a6 RequestAddressResponse
	e.call("/IpamDriver.RequestAddress", RequestAddressRequest{PoolID: p4.PoolID}, &a4)
	e.call("/IpamDriver.RequestAddress", RequestAddressRequest{PoolID: p6.PoolID}, &a6)
	ip4, ip6 := netip.MustParsePrefix(a4.Address), netip.MustParsePrefix(a6.Address)
	if !netip.MustParsePrefix("10.70.0.0/24").Contains(ip4.Addr()) || ip4.Bits() != 32 ||
		!netip.MustParsePrefix("fd00:70::/64").Contains(ip6.Addr()) || ip6.Bits() != 128 {
		t.Fatalf("addresses %s %s", a4.Address, a6.Address)
	}
	var ce CreateEndpointResponse
	e.call("/NetworkDriver.CreateEndpoint", CreateEndpointRequest{NetworkID: netID, EndpointID: epID,
		Interface: &EndpointInterface{Address: a4.Address, AddressIPv6: a6.Address}}, &ce)
	mac := containerMAC(epID).String()
	if ce.Interface == nil || ce.Interface.MacAddress != mac || mac[:3] != "02:" || mac == containerMAC(epID2).String() {
		t.Errorf("CreateEndpoint chose %+v, want %s, a locally administered MAC of the endpoint", ce.Interface, mac)
	}
	checkEndpoint(t, e, ip4.Addr(), ip6.Addr())

	var join JoinResponse
	e.call("/NetworkDriver.Join", JoinRequest{NetworkID: netID, EndpointID: epID, SandboxKey: "/var/run/docker/netns/x"}, &join)
	want := JoinResponse{InterfaceName: InterfaceName{SrcName: "temp9f8e7d6c5b4", DstPrefix: "cali"},
		Gateway: "169.254.1.1", GatewayIPv6: "fe80::ecee:eeff:feee:eeee",
		StaticRoutes: []StaticRoute{{Destination: "169.254.1.1/32", RouteType: 1}, {Destination: "fe80::ecee:eeff:feee:eeee/128", RouteType: 1}}}
	if !reflect.DeepEqual(join, want) {
		t.Errorf("Join = %+v\nwant   %+v", join, want)
	}
	v := e.kern.links["cali9f8e7d6c5b4"]
	if v.host != "cali9f8e7d6c5b4" || v.mac.String() != mac || !slices.Equal(v.addrs, []netip.Addr{ip4.Addr(), ip6.Addr()}) {
		t.Errorf("veth = %+v", v)
	}
	e.call("/NetworkDriver.ProgramExternalConnectivity", EndpointRequest{NetworkID: netID, EndpointID: epID}, nil)
	var info InfoResponse
	e.call("/NetworkDriver.EndpointOperInfo", EndpointRequest{NetworkID: netID, EndpointID: epID}, &info)
	if info.Value["HostInterface"] != "cali9f8e7d6c5b4" {
		t.Errorf("EndpointOperInfo = %v", info.Value)
	}

	// docker rm, then docker network rm; every call twice (idempotent).
	for range 2 {
		e.call("/NetworkDriver.RevokeExternalConnectivity", EndpointRequest{NetworkID: netID, EndpointID: epID}, nil)
		e.call("/NetworkDriver.Leave", EndpointRequest{NetworkID: netID, EndpointID: epID}, nil)
		if l := e.kern.names(); len(l) != 0 {
			t.Errorf("links after Leave: %v", l)
		}
		e.call("/NetworkDriver.DeleteEndpoint", EndpointRequest{NetworkID: netID, EndpointID: epID}, nil)
		e.call("/IpamDriver.ReleaseAddress", ReleaseAddressRequest{PoolID: p4.PoolID, Address: ip4.Addr().String()}, nil)
		e.call("/IpamDriver.ReleaseAddress", ReleaseAddressRequest{PoolID: p6.PoolID, Address: ip6.Addr().String()}, nil)
	}
	for range 2 {
		e.call("/NetworkDriver.DeleteNetwork", NetworkRequest{NetworkID: netID}, nil)
		// Docker releases the gateway it took from the pool's Data.
		e.call("/IpamDriver.ReleaseAddress", ReleaseAddressRequest{PoolID: p4.PoolID, Address: "0.0.0.0"}, nil)
		e.call("/IpamDriver.ReleaseAddress", ReleaseAddressRequest{PoolID: p6.PoolID, Address: "::"}, nil)
		e.call("/IpamDriver.ReleasePool", ReleasePoolRequest{PoolID: p4.PoolID}, nil)
		e.call("/IpamDriver.ReleasePool", ReleasePoolRequest{PoolID: p6.PoolID}, nil)
	}
	if w := e.endpoints(); len(w) != 0 {
		t.Errorf("endpoints left: %v", w)
	}
	if h := e.handles(); len(h) != 0 {
		t.Errorf("IPAM handles left: %v", h)
	}
}

// checkEndpoint checks the WorkloadEndpoint and profile CreateEndpoint wrote.
func checkEndpoint(t *testing.T, e *env, ip4, ip6 netip.Addr) {
	t.Helper()
	r, err := e.cl.GetResource(context.Background(), wepKind, "libnetwork", "node1-libnetwork-libnetwork-"+epID)
	if err != nil {
		t.Fatal(err)
	}
	w := r.(*api.WorkloadEndpoint)
	s := w.Spec
	if s.Orchestrator != "libnetwork" || s.Workload != "libnetwork" || s.Node != "node1" || s.Endpoint != epID ||
		s.InterfaceName != "cali9f8e7d6c5b4" || s.MAC != containerMAC(epID).String() ||
		!slices.Equal(s.IPNetworks, []string{ip4.String() + "/32", ip6.String() + "/128"}) || !slices.Equal(s.Profiles, []string{"net1"}) {
		t.Errorf("endpoint spec = %+v", s)
	}
	if w.Metadata.Labels[api.LabelOrchestrator] != "libnetwork" || w.Metadata.Labels[api.LabelNamespace] != "libnetwork" {
		t.Errorf("endpoint labels = %v", w.Metadata.Labels)
	}
	pr, err := e.cl.GetResource(context.Background(), profileKind, "", "net1")
	if err != nil {
		t.Fatal(err)
	}
	p := pr.(*api.Profile).Spec
	if len(p.Ingress) != 1 || p.Ingress[0].Source.Selector != "has(net1)" || len(p.Egress) != 1 ||
		p.Egress[0].Action != api.ActionAllow || !reflect.DeepEqual(p.LabelsToApply, map[string]string{"net1": ""}) {
		t.Errorf("profile = %+v", p)
	}
	hs := e.handles()
	if len(hs) != 2 || !strings.HasPrefix(hs[0], "libnetwork.") || !strings.HasPrefix(hs[1], "libnetwork.") {
		t.Errorf("handles = %v", hs)
	}
}

// docker network create --subnet <a Calico pool>; docker run --ip.
func TestSubnetAndSpecificAddress(t *testing.T) {
	e := newEnv(t, nil)
	e.pool("v4", "10.71.0.0/24")
	e.pool("other", "10.72.0.0/24")
	var p RequestPoolResponse
	e.call("/IpamDriver.RequestPool", RequestPoolRequest{AddressSpace: LocalAddressSpace, Pool: "10.71.0.0/24"}, &p)
	if p.PoolID != "10.71.0.0/24" || p.Pool != "10.71.0.0/24" || p.Data[gatewayKey] != "0.0.0.0/0" {
		t.Errorf("pool = %+v", p)
	}
	for range 3 {
		var a RequestAddressResponse
		e.call("/IpamDriver.RequestAddress", RequestAddressRequest{PoolID: p.PoolID}, &a)
		if !netip.MustParsePrefix("10.71.0.0/24").Contains(netip.MustParsePrefix(a.Address).Addr()) {
			t.Errorf("address %s is not from the network's pool", a.Address)
		}
	}
	var a RequestAddressResponse
	e.call("/IpamDriver.RequestAddress", RequestAddressRequest{PoolID: p.PoolID, Address: "10.71.0.200"}, &a)
	if a.Address != "10.71.0.200/32" {
		t.Errorf("specific address = %s", a.Address)
	}
	if msg := e.callErr("/IpamDriver.RequestAddress", RequestAddressRequest{PoolID: p.PoolID, Address: "10.71.0.200"}); !strings.Contains(msg, "in use") {
		t.Errorf("second request for a taken address: %s", msg)
	}
	// A gateway request (docker only sends one when Data has no gateway)
	// gets the dummy gateway and allocates nothing.
	e.call("/IpamDriver.RequestAddress", RequestAddressRequest{PoolID: p.PoolID, Options: map[string]string{GatewayOption: GatewayRequest}}, &a)
	if a.Address != "0.0.0.0/0" || len(e.handles()) != 4 {
		t.Errorf("gateway request: %s, handles %v", a.Address, e.handles())
	}
	// An address another orchestrator holds is not released.
	al := ipam.New(e.cl)
	if _, err := al.AssignIP(context.Background(), ipam.AssignIPArgs{Addr: netip.MustParseAddr("10.72.0.5"), HandleID: "k8s-pod-network.abc", Node: "node1"}); err != nil {
		t.Fatal(err)
	}
	if msg := e.callErr("/IpamDriver.ReleaseAddress", ReleaseAddressRequest{PoolID: PoolIDv4, Address: "10.72.0.5"}); !strings.Contains(msg, "k8s-pod-network.abc") {
		t.Errorf("release of a CNI address: %s", msg)
	}
	if ips, _ := al.IPsByHandle(context.Background(), "k8s-pod-network.abc"); len(ips) != 1 {
		t.Errorf("CNI allocation was released: %v", ips)
	}
	e.call("/IpamDriver.ReleaseAddress", ReleaseAddressRequest{PoolID: p.PoolID, Address: "10.71.0.200"}, nil)
	if len(e.handles()) != 4 { // three auto-assigned, one CNI
		t.Errorf("handles after release: %v", e.handles())
	}
}

// A MAC chosen by the user is kept and not answered; without profiles the
// endpoint has none and no network name is needed.
func TestUserMACWithoutProfiles(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.NoProfiles = true; c.IfPrefix = "eth" })
	code, body := e.post("/NetworkDriver.CreateEndpoint", mustJSON(t, CreateEndpointRequest{NetworkID: netID, EndpointID: epID2,
		Interface: &EndpointInterface{Address: "10.73.0.4/32", MacAddress: "02:42:ac:11:00:02"}}))
	if code != 200 || strings.TrimSpace(body) != "{}" {
		t.Errorf("CreateEndpoint with a MAC answered %d %s, want {}", code, body)
	}
	r, err := e.cl.GetResource(context.Background(), wepKind, "libnetwork", "node1-libnetwork-libnetwork-"+epID2)
	if err != nil {
		t.Fatal(err)
	}
	if w := r.(*api.WorkloadEndpoint); w.Spec.MAC != "02:42:ac:11:00:02" || len(w.Spec.Profiles) != 0 {
		t.Errorf("endpoint = %+v", w.Spec)
	}
	var join JoinResponse
	e.call("/NetworkDriver.Join", JoinRequest{NetworkID: netID, EndpointID: epID2}, &join)
	if join.InterfaceName.DstPrefix != "eth" || join.GatewayIPv6 != "" || len(join.StaticRoutes) != 1 {
		t.Errorf("Join = %+v", join)
	}
	if v := e.kern.links["cali0a1b2c3d4e5"]; v.mac.String() != "02:42:ac:11:00:02" {
		t.Errorf("container end MAC = %s", v.mac)
	}
}
