package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/calico-aio/calico-aio/libnetwork"
	"github.com/calico-aio/calico-aio/store/api"
)

// Docker IDs: 64 hex digits.
const (
	lnNetA = "a1a1a1a1b2b2b2b2c3c3c3c3d4d4d4d4e5e5e5e5f6f6f6f6a7a7a7a7b8b8b8b8"
	lnNetB = "b2b2b2b2c3c3c3c3d4d4d4d4e5e5e5e5f6f6f6f6a7a7a7a7b8b8b8b8c9c9c9c9"
	lnEp1  = "1111aaaa2222bbbb3333cccc4444dddd5555eeee6666ffff7777000088889999"
	lnEp2  = "2222bbbb3333cccc4444dddd5555eeee6666ffff7777000088889999aaaa1111"
	lnEp3  = "3333cccc4444dddd5555eeee6666ffff7777000088889999aaaa1111bbbb2222"
	lnEp4  = "4444dddd5555eeee6666ffff7777000088889999aaaa1111bbbb2222cccc3333"
)

// Docker's calls, in Docker's order, over the driver's sockets give
// containers working networking with the same endpoints, profiles and
// IPAM as CNI pods: containers of one network reach each other over IPv4
// and IPv6, a container of another network is kept out by the agent
// enforcing the network profiles, and removal leaves nothing behind.
func TestLibnetworkDockerFlow(t *testing.T) {
	e := newCNIEnv(t, 51)
	e.pool("v4", "10.151.0.0/24")
	e.pool("v6", "fd00:151::/64")
	e.startAgent("node1")
	d := e.startLibnetwork(map[string]string{lnNetA: "frontend", lnNetB: "backend"})
	d.handshake()
	front := d.createNetwork(lnNetA, true)
	back := d.createNetwork(lnNetB, false)
	c1, c2 := d.run(front, lnEp1), d.run(front, lnEp2)
	c3, c4 := d.run(back, lnEp3), d.run(back, lnEp4)

	lnCheckHostSide(t, e, c1)
	r, err := e.cl.GetResource(context.Background(), wepKindInfo(), "libnetwork", "node1-libnetwork-libnetwork-"+lnEp1)
	if err != nil {
		t.Fatal(err)
	}
	if w := r.(*api.WorkloadEndpoint); w.Spec.Orchestrator != "libnetwork" || w.Spec.Node != "node1" ||
		strings.Join(w.Spec.Profiles, ",") != "frontend" || strings.Join(w.Spec.IPNetworks, ",") != c1.ip4+"/32,"+c1.ip6+"/128" {
		t.Errorf("endpoint of c1: %+v", w.Spec)
	}
	// Denied pings show the profiles apply only together with allowed
	// ones in the same round (the path works and the agent has programmed).
	eventually(t, 15*time.Second, "one network's containers talk; the other network is kept out by its profile", func() error {
		return errors.Join(reachable(c1.ns, c2.ip4)(), reachable(c2.ns, c1.ip4)(), reachable(c1.ns, c2.ip6)(),
			reachable(c3.ns, c4.ip4)(), unreachable(c3.ns, c1.ip4)(), unreachable(c1.ns, c3.ip4)())
	})

	for _, c := range []*lnContainer{c1, c2, c3, c4} {
		d.stop(c)
		if out, _ := inNS(c.ns, "ip", "-o", "link", "show"); strings.Contains(out, c.join.InterfaceName.DstPrefix+"0") {
			t.Errorf("container interface left after Leave: %s", out)
		}
	}
	d.removeNetwork(front)
	d.removeNetwork(back)
	e.assertClean()
	if out := mustNS(t, e.host.ns, "ip", "-o", "link", "show"); strings.Contains(out, "temp") {
		t.Errorf("temporary veth ends left in the host: %s", out)
	}
	routes := mustNS(t, e.host.ns, "ip", "route", "show", "proto", "80") + mustNS(t, e.host.ns, "ip", "-6", "route", "show", "proto", "80")
	for _, c := range []*lnContainer{c1, c2, c3, c4} {
		for _, a := range []string{c.ip4, c.ip6} {
			if a != "" && strings.Contains(routes, a+" ") {
				t.Errorf("workload route for %s left: %s", a, routes)
			}
		}
	}
}

// lnCheckHostSide checks the host end of a container's veth: Calico's name,
// MAC, sysctls and a workload route per address.
func lnCheckHostSide(t *testing.T, e *cniEnv, c *lnContainer) {
	t.Helper()
	veth := "cali" + c.endpoint[:11]
	link := mustNS(t, e.host.ns, "ip", "-o", "link", "show", veth)
	if !strings.Contains(link, "ee:ee:ee:ee:ee:ee") {
		t.Errorf("host veth: %s", link)
	}
	if v := strings.TrimSpace(mustNS(t, e.host.ns, "cat", "/proc/sys/net/ipv4/conf/"+veth+"/proxy_arp")); v != "1" {
		t.Errorf("proxy_arp on %s = %s", veth, v)
	}
	for _, a := range []string{c.ip4, c.ip6} {
		fam := "-4"
		if strings.Contains(a, ":") {
			fam = "-6"
		}
		r := mustNS(t, e.host.ns, "ip", fam, "route", "show", "table", "main", "match", a)
		if !strings.Contains(r, a+" dev "+veth+" proto 80") {
			t.Errorf("host route for %s: %s", a, r)
		}
	}
}

// Over the real socket: requests that are not the protocol's and calls
// that cannot be carried out are answered {"Err": ...}, and change nothing.
func TestLibnetworkErrorsOverSocket(t *testing.T) {
	e := newCNIEnv(t, 52)
	e.pool("v4", "10.152.0.0/24")
	d := e.startLibnetwork(map[string]string{lnNetA: "frontend"})
	d.handshake()
	for _, tc := range []struct {
		c          *http.Client
		path, body string
		code       int
	}{
		{d.net, "/NetworkDriver.CreateEndpoint", `{"NetworkID": "` + lnNetA, http.StatusBadRequest},
		{d.net, "/NetworkDriver.Teleport", `{}`, http.StatusNotFound},
		{d.net, "/NetworkDriver.Join", `{"NetworkID":"` + lnNetA + `","EndpointID":"` + lnEp1 + `","SandboxKey":"/x"}`, http.StatusOK},
		{d.net, "/NetworkDriver.EndpointOperInfo", `{"NetworkID":"` + lnNetA + `","EndpointID":"` + lnEp1 + `"}`, http.StatusOK},
		{d.ipam, "/IpamDriver.RequestPool", `{"AddressSpace":"CalicoLocalAddressSpace","Pool":"192.168.0.0/16"}`, http.StatusOK},
		{d.ipam, "/IpamDriver.RequestAddress", `{"PoolID":"CalicoPoolIPv4","Address":"10.152.0.1","Options":{"RequestAddressType":"com.docker.network.gateway"}}`, http.StatusOK},
	} {
		code, body := d.post(tc.c, tc.path, tc.body)
		var r libnetwork.ErrorResponse
		if err := json.Unmarshal(body, &r); err != nil || r.Err == "" || code != tc.code {
			t.Errorf("%s %s: got %d %s, want %d with Err", tc.path, tc.body, code, body, tc.code)
		}
	}
	// Join refuses an address the host routes elsewhere and leaves no veth.
	mustNS(t, e.host.ns, "ip", "route", "add", "10.152.0.77/32", "dev", "uplink")
	ep := libnetwork.EndpointRequest{NetworkID: lnNetA, EndpointID: lnEp2}
	d.call(d.net, "/NetworkDriver.CreateEndpoint", libnetwork.CreateEndpointRequest{NetworkID: lnNetA, EndpointID: lnEp2,
		Interface: &libnetwork.EndpointInterface{Address: "10.152.0.77/32"}}, nil)
	_, body := d.post(d.net, "/NetworkDriver.Join", libnetwork.JoinRequest{NetworkID: lnNetA, EndpointID: lnEp2})
	if !strings.Contains(string(body), "already exists via interface uplink") {
		t.Errorf("Join over a taken route: %s", body)
	}
	if out := mustNS(t, e.host.ns, "ip", "-o", "link", "show"); strings.Contains(out, "cali") || strings.Contains(out, "temp") {
		t.Errorf("failed Join left links: %s", out)
	}
	d.call(d.net, "/NetworkDriver.DeleteEndpoint", ep, nil)
	e.assertClean()
}
