package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/calico-aio/calico-aio/libnetwork"
)

// lnDocker plays dockerd against the libnetwork driver: it sends the
// driver's calls in Docker's order over the plugin sockets and does to
// the namespaces what Docker's sandbox code does with the answers.
type lnDocker struct {
	e    *cniEnv
	net  *http.Client // calico.sock: the network driver
	ipam *http.Client // calico-ipam.sock: the IPAM driver
}

// startLibnetwork runs the driver in-process, its kernel work in the host
// namespace, on sockets in a temp dir; names is what the Docker API says
// each network is called.
func (e *cniEnv) startLibnetwork(names map[string]string) *lnDocker {
	e.t.Helper()
	dir := e.t.TempDir()
	srv, err := libnetwork.Listen(libnetwork.Config{Node: "node1", Store: e.cl, SocketDir: dir,
		DockerHost: lnFakeDockerAPI(e.t, names), Do: e.inHost})
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	e.t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			e.t.Errorf("driver: %v", err)
		}
	})
	return &lnDocker{e: e, net: lnUnixClient(filepath.Join(dir, "calico.sock")), ipam: lnUnixClient(filepath.Join(dir, "calico-ipam.sock"))}
}

func lnUnixClient(path string) *http.Client {
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		}}}
}

// lnFakeDockerAPI answers GET /networks/<id> with the network's name, as
// dockerd's API does; it returns the DOCKER_HOST URL.
func lnFakeDockerAPI(t testing.TB, names map[string]string) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "docker.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name, ok := names[strings.TrimPrefix(r.URL.Path, "/networks/")]
		if !ok {
			http.Error(w, `{"message":"network not found"}`, http.StatusNotFound)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]string{"Name": name})
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "unix://" + sock
}

// post sends one call and returns the status and body.
func (d *lnDocker) post(c *http.Client, path string, req any) (int, []byte) {
	d.e.t.Helper()
	body, ok := req.(string)
	if !ok {
		b, err := json.Marshal(req)
		if err != nil {
			d.e.t.Fatal(err)
		}
		body = string(b)
	}
	resp, err := c.Post("http://plugin"+path, "application/vnd.docker.plugins.v1.2+json", strings.NewReader(body))
	if err != nil {
		d.e.t.Fatalf("%s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// call sends one call that must succeed and decodes its answer.
func (d *lnDocker) call(c *http.Client, path string, req, resp any) {
	d.e.t.Helper()
	code, body := d.post(c, path, req)
	if code != http.StatusOK || bytes.Contains(body, []byte(`"Err"`)) {
		d.e.t.Fatalf("%s: %d %s", path, code, body)
	}
	if resp != nil {
		if err := json.Unmarshal(body, resp); err != nil {
			d.e.t.Fatalf("%s: %v in %s", path, err, body)
		}
	}
}

// handshake is what dockerd sends when a network first uses the drivers:
// it loads the network driver, then the IPAM driver.
func (d *lnDocker) handshake() {
	var act libnetwork.ActivateResponse
	d.call(d.net, "/Plugin.Activate", "", &act)
	if strings.Join(act.Implements, ",") != "NetworkDriver,IpamDriver" {
		d.e.t.Errorf("calico implements %v", act.Implements)
	}
	d.call(d.net, "/NetworkDriver.GetCapabilities", "", nil)
	d.call(d.ipam, "/Plugin.Activate", "", &act)
	if strings.Join(act.Implements, ",") != "IpamDriver" {
		d.e.t.Errorf("calico-ipam implements %v", act.Implements)
	}
	d.call(d.ipam, "/IpamDriver.GetCapabilities", "", nil)
	d.call(d.ipam, "/IpamDriver.GetDefaultAddressSpaces", "", nil)
}

// lnNetwork is a network made by "docker network create [--ipv6] -d
// calico --ipam-driver calico-ipam".
type lnNetwork struct {
	id           string
	pool4, pool6 libnetwork.RequestPoolResponse
}

func (d *lnDocker) createNetwork(id string, v6 bool) lnNetwork {
	n := lnNetwork{id: id}
	req := libnetwork.CreateNetworkRequest{NetworkID: id, Options: map[string]any{
		"com.docker.network.enable_ipv6": v6, "com.docker.network.generic": map[string]any{}}}
	d.call(d.ipam, "/IpamDriver.RequestPool", libnetwork.RequestPoolRequest{AddressSpace: libnetwork.LocalAddressSpace}, &n.pool4)
	req.IPv4Data = []libnetwork.IPAMData{{AddressSpace: libnetwork.LocalAddressSpace, Pool: n.pool4.Pool, Gateway: n.pool4.Data["com.docker.network.gateway"]}}
	if v6 {
		d.call(d.ipam, "/IpamDriver.RequestPool", libnetwork.RequestPoolRequest{AddressSpace: libnetwork.LocalAddressSpace, V6: true}, &n.pool6)
		req.IPv6Data = []libnetwork.IPAMData{{AddressSpace: libnetwork.LocalAddressSpace, Pool: n.pool6.Pool, Gateway: n.pool6.Data["com.docker.network.gateway"]}}
	}
	// The pools' Data carry a gateway, so Docker asks for no gateway address.
	d.call(d.net, "/NetworkDriver.CreateNetwork", req, nil)
	return n
}

// removeNetwork is "docker network rm": Docker releases the gateway it
// took from the pool's Data, then the pools.
func (d *lnDocker) removeNetwork(n lnNetwork) {
	d.call(d.net, "/NetworkDriver.DeleteNetwork", libnetwork.NetworkRequest{NetworkID: n.id}, nil)
	for _, p := range []libnetwork.RequestPoolResponse{n.pool4, n.pool6} {
		if p.PoolID == "" {
			continue
		}
		gw, _, _ := strings.Cut(p.Data["com.docker.network.gateway"], "/")
		d.call(d.ipam, "/IpamDriver.ReleaseAddress", libnetwork.ReleaseAddressRequest{PoolID: p.PoolID, Address: gw}, nil)
		d.call(d.ipam, "/IpamDriver.ReleasePool", libnetwork.ReleasePoolRequest{PoolID: p.PoolID}, nil)
	}
}

// lnContainer is one "docker run --net <network>".
type lnContainer struct {
	ns       ns.NetNS
	net      lnNetwork
	endpoint string
	ip4, ip6 string
	join     libnetwork.JoinResponse
}

func (d *lnDocker) run(n lnNetwork, endpointID string) *lnContainer {
	t := d.e.t
	t.Helper()
	c := &lnContainer{ns: newNS(t), net: n, endpoint: endpointID}
	var a4, a6 libnetwork.RequestAddressResponse
	d.call(d.ipam, "/IpamDriver.RequestAddress", libnetwork.RequestAddressRequest{PoolID: n.pool4.PoolID}, &a4)
	iface := &libnetwork.EndpointInterface{Address: a4.Address}
	c.ip4, _, _ = strings.Cut(a4.Address, "/")
	if n.pool6.PoolID != "" {
		d.call(d.ipam, "/IpamDriver.RequestAddress", libnetwork.RequestAddressRequest{PoolID: n.pool6.PoolID}, &a6)
		iface.AddressIPv6 = a6.Address
		c.ip6, _, _ = strings.Cut(a6.Address, "/")
	}
	var ce libnetwork.CreateEndpointResponse
	d.call(d.net, "/NetworkDriver.CreateEndpoint", libnetwork.CreateEndpointRequest{NetworkID: n.id, EndpointID: endpointID, Interface: iface, Options: map[string]any{}}, &ce)
	if ce.Interface == nil || ce.Interface.MacAddress == "" {
		t.Fatalf("CreateEndpoint chose no MAC: %+v", ce)
	}
	d.call(d.net, "/NetworkDriver.Join", libnetwork.JoinRequest{NetworkID: n.id, EndpointID: endpointID, SandboxKey: c.ns.Path(), Options: map[string]any{}}, &c.join)
	d.plumb(c, iface, ce.Interface.MacAddress)
	d.call(d.net, "/NetworkDriver.ProgramExternalConnectivity", libnetwork.EndpointRequest{NetworkID: n.id, EndpointID: endpointID}, nil)
	return c
}

// plumb does what Docker's sandbox code does after Join: move SrcName
// into the container, name it <DstPrefix>0, give it the MAC and
// addresses, add the static routes and the default routes via the
// gateways.
func (d *lnDocker) plumb(c *lnContainer, iface *libnetwork.EndpointInterface, mac string) {
	t, j := d.e.t, c.join
	t.Helper()
	name := j.InterfaceName.DstPrefix + "0"
	mustNS(t, d.e.host.ns, "ip", "link", "set", j.InterfaceName.SrcName, "netns", nsName(c.ns))
	mustNS(t, c.ns, "ip", "link", "set", j.InterfaceName.SrcName, "name", name)
	mustNS(t, c.ns, "ip", "link", "set", name, "address", mac)
	mustNS(t, c.ns, "ip", "addr", "add", iface.Address, "dev", name)
	if iface.AddressIPv6 != "" {
		mustNS(t, c.ns, "ip", "-6", "addr", "add", iface.AddressIPv6, "dev", name, "nodad")
	}
	mustNS(t, c.ns, "ip", "link", "set", name, "up")
	for _, r := range j.StaticRoutes {
		if r.RouteType != 1 {
			t.Fatalf("unexpected static route %+v", r)
		}
		mustNS(t, c.ns, "ip", "route", "add", r.Destination, "dev", name, "scope", "link")
	}
	if j.Gateway != "" {
		mustNS(t, c.ns, "ip", "route", "add", "default", "via", j.Gateway, "dev", name)
	}
	if j.GatewayIPv6 != "" && iface.AddressIPv6 != "" {
		mustNS(t, c.ns, "ip", "-6", "route", "add", "default", "via", j.GatewayIPv6, "dev", name)
	}
}

// stop is "docker rm -f": the endpoint leaves the sandbox and goes, and
// Docker releases its addresses.
func (d *lnDocker) stop(c *lnContainer) {
	ep := libnetwork.EndpointRequest{NetworkID: c.net.id, EndpointID: c.endpoint}
	d.call(d.net, "/NetworkDriver.RevokeExternalConnectivity", ep, nil)
	d.call(d.net, "/NetworkDriver.Leave", ep, nil)
	d.call(d.net, "/NetworkDriver.DeleteEndpoint", ep, nil)
	d.call(d.ipam, "/IpamDriver.ReleaseAddress", libnetwork.ReleaseAddressRequest{PoolID: c.net.pool4.PoolID, Address: c.ip4}, nil)
	if c.ip6 != "" {
		d.call(d.ipam, "/IpamDriver.ReleaseAddress", libnetwork.ReleaseAddressRequest{PoolID: c.net.pool6.PoolID, Address: c.ip6}, nil)
	}
}
