package e2e

import (
	"context"
	"strings"
	"testing"

	"github.com/containernetworking/cni/libcni"

	"github.com/calico-aio/calico-aio/store/api"
)

// The pod is wired exactly as DESIGN.md says: the 169.254.1.1 trick, host
// veth naming, MAC, sysctls, our route protocol; the endpoint is Calico's.
func TestCNIWiringDetails(t *testing.T) { forEachCNIPath(t, testCNIWiringDetails) }

func testCNIWiringDetails(t *testing.T, path cniPath) {
	e := newCNIEnv(t, 2)
	e.servePath(path, "node-a")
	e.pool("v4", "10.101.0.0/24")
	e.pool("v6", "fd00:101::/64")
	l := e.conflist("1.1.0", "wired", e.calicoPlugin("node-a", `,"assign_ipv6":"true"`))
	pod := newNS(t)
	rt := &libcni.RuntimeConf{ContainerID: "0123456789abcdef", NetNS: pod.Path(), IfName: "eth0"}
	res, err := e.add(l, rt)
	if err != nil {
		t.Fatal(err)
	}
	v4, v6 := podAddrs(res)
	host := "cali0123456789a"

	link := mustNS(t, e.host.ns, "ip", "-o", "link", "show", host)
	if !strings.Contains(link, "link/ether ee:ee:ee:ee:ee:ee") || !strings.Contains(link, "state UP") {
		t.Errorf("host veth: %s", link)
	}
	routes := mustNS(t, e.host.ns, "ip", "route", "show", v4+"/32")
	if !strings.Contains(routes, "dev "+host) || !strings.Contains(routes, "proto 80") || !strings.Contains(routes, "scope link") {
		t.Errorf("host route: %q", routes)
	}
	routes6 := mustNS(t, e.host.ns, "ip", "-6", "route", "show", v6+"/128")
	if !strings.Contains(routes6, "dev "+host) || !strings.Contains(routes6, "proto 80") {
		t.Errorf("host v6 route: %q", routes6)
	}
	for key, want := range map[string]string{
		"net.ipv4.conf." + host + ".proxy_arp":      "1",
		"net.ipv4.neigh." + host + ".proxy_delay":   "0",
		"net.ipv4.conf." + host + ".forwarding":     "1",
		"net.ipv4.conf." + host + ".route_localnet": "1",
		"net.ipv6.conf." + host + ".proxy_ndp":      "1",
		"net.ipv6.conf." + host + ".accept_ra":      "0",
		"net.ipv6.conf." + host + ".forwarding":     "1",
	} {
		if got := strings.TrimSpace(mustNS(t, e.host.ns, "sysctl", "-n", key)); got != want {
			t.Errorf("%s = %s, want %s", key, got, want)
		}
	}
	addrs := mustNS(t, pod, "ip", "-o", "addr", "show", "dev", "eth0")
	if !strings.Contains(addrs, v4+"/32") || !strings.Contains(addrs, v6+"/128") {
		t.Errorf("pod addresses: %s", addrs)
	}
	// The IPv6 address is usable at once: no duplicate address detection,
	// so never tentative (a listener could not bind it).
	if a6 := mustNS(t, pod, "ip", "-o", "-6", "addr", "show", "dev", "eth0", "scope", "global"); !strings.Contains(a6, "nodad") || strings.Contains(a6, "tentative") {
		t.Errorf("pod IPv6 address not marked nodad, or tentative: %s", a6)
	}
	podRoutes := mustNS(t, pod, "ip", "route")
	for _, want := range []string{"default via 169.254.1.1 dev eth0", "169.254.1.1 dev eth0 scope link"} {
		if !strings.Contains(podRoutes, want) {
			t.Errorf("pod routes lack %q:\n%s", want, podRoutes)
		}
	}
	if r6 := mustNS(t, pod, "ip", "-6", "route"); !strings.Contains(r6, "default via fe80::ecee:eeff:feee:eeee dev eth0") {
		t.Errorf("pod v6 routes:\n%s", r6)
	}
	// The endpoint, as Calico writes it.
	k, _ := api.LookupKind("WorkloadEndpoint")
	r, err := e.cl.GetResource(context.Background(), k, "default", "node--a-cni-0123456789abcdef-eth0")
	if err != nil {
		t.Fatal(err)
	}
	w := r.(*api.WorkloadEndpoint)
	podLink := strings.Fields(mustNS(t, pod, "ip", "-o", "link", "show", "eth0"))
	podMAC := ""
	for i, f := range podLink {
		if f == "link/ether" {
			podMAC = podLink[i+1]
		}
	}
	if w.Spec.InterfaceName != host || w.Spec.MAC != podMAC || w.Spec.Orchestrator != "cni" || w.Spec.Node != "node-a" ||
		w.Spec.ContainerID != rt.ContainerID || w.Spec.Endpoint != "eth0" || strings.Join(w.Spec.Profiles, ",") != "wired" ||
		strings.Join(w.Spec.IPNetworks, ",") != v4+"/32,"+v6+"/128" ||
		w.Metadata.Labels["projectcalico.org/namespace"] != "default" || w.Metadata.Labels["projectcalico.org/orchestrator"] != "cni" {
		t.Errorf("endpoint = %+v %+v", w.Metadata, w.Spec)
	}
	pk, _ := api.LookupKind("Profile")
	pr, err := e.cl.GetResource(context.Background(), pk, "", "wired")
	if err != nil {
		t.Fatalf("network profile not created: %v", err)
	}
	p := pr.(*api.Profile)
	if len(p.Spec.Ingress) != 1 || p.Spec.Ingress[0].Source.Selector != "has(wired)" || p.Spec.LabelsToApply["wired"] != "" || len(p.Spec.Egress) != 1 {
		t.Errorf("profile = %+v", p.Spec)
	}
	// A repeated ADD returns the same addresses and creates nothing new.
	again, err := e.add(l, rt)
	if err != nil {
		t.Fatal(err)
	}
	if a4, a6 := podAddrs(again); a4 != v4 || a6 != v6 {
		t.Errorf("repeated ADD gave %s %s, want %s %s", a4, a6, v4, v6)
	}
	if err := e.del(l, rt); err != nil {
		t.Fatal(err)
	}
	e.assertClean()
}
