package libnetwork

import (
	"context"
	"testing"

	"github.com/calico-aio/calico-aio/store/api"
)

// Endpoint IDs that share their first 11 characters get different host
// interfaces (the endpoint records each), a pair already on the host under
// the first choice that no endpoint records is left alone, and removing
// one endpoint removes only its own pair.
func TestSharedPrefixEndpoints(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.NoProfiles = true })
	const id1, id2, id3 = "default-web1", "default-web2", "default-web3"
	hostOf := func(id string) string {
		t.Helper()
		r, err := e.cl.GetResource(context.Background(), wepKind, Orchestrator, "node1-"+Orchestrator+"-"+Orchestrator+"-"+escape(id))
		if err != nil {
			t.Fatal(err)
		}
		return r.(*api.WorkloadEndpoint).Spec.InterfaceName
	}
	joined := map[string]string{}
	for i, id := range []string{id1, id2} {
		e.call("/NetworkDriver.CreateEndpoint", CreateEndpointRequest{NetworkID: netID, EndpointID: id,
			Interface: &EndpointInterface{Address: []string{"10.74.0.1/32", "10.74.0.2/32"}[i]}}, nil)
		var join JoinResponse
		e.call("/NetworkDriver.Join", JoinRequest{NetworkID: netID, EndpointID: id}, &join)
		joined[id] = join.InterfaceName.SrcName
	}
	h1, h2 := hostOf(id1), hostOf(id2)
	if h1 != "calidefault-web" || h2 == h1 || len(h2) != 15 {
		t.Fatalf("host interfaces %q and %q", h1, h2)
	}
	if joined[id1] != "tempdefault-web" || joined[id2] != "temp"+h2[4:] {
		t.Errorf("Join moved %v, want the temporary ends of %s and %s", joined, h1, h2)
	}
	if v, ok := e.kern.links[h2]; !ok || v.addrs[0].String() != "10.74.0.2" {
		t.Errorf("pair %s = %+v", h2, v)
	}
	var info InfoResponse
	e.call("/NetworkDriver.EndpointOperInfo", EndpointRequest{NetworkID: netID, EndpointID: id2}, &info)
	if info.Value["HostInterface"] != h2 {
		t.Errorf("EndpointOperInfo = %v, want host interface %s", info.Value, h2)
	}

	// The first endpoint goes: the second's pair stays.
	e.call("/NetworkDriver.Leave", EndpointRequest{NetworkID: netID, EndpointID: id1}, nil)
	e.call("/NetworkDriver.DeleteEndpoint", EndpointRequest{NetworkID: netID, EndpointID: id1}, nil)
	if l := e.kern.names(); len(l) != 1 || l[0] != h2 {
		t.Fatalf("pairs after removing %s: %v, want [%s]", id1, l, h2)
	}

	// A pair under the first choice that no endpoint records, as a
	// workload of another driver would have: a third endpoint records
	// another name and leaves the pair alone.
	e.kern.links[h1] = vethSpec{host: h1}
	e.call("/NetworkDriver.CreateEndpoint", CreateEndpointRequest{NetworkID: netID, EndpointID: id3,
		Interface: &EndpointInterface{Address: "10.74.0.3/32"}}, nil)
	if got := hostOf(id3); got == h1 || got == h2 {
		t.Fatalf("CreateEndpoint recorded %q, taken on the host or by %s", got, id2)
	}
	var join JoinResponse
	e.call("/NetworkDriver.Join", JoinRequest{NetworkID: netID, EndpointID: id3}, &join)
	h3 := hostOf(id3)
	if h3 == h1 || h3 == h2 || join.InterfaceName.SrcName != "temp"+h3[4:] {
		t.Fatalf("third endpoint joined as %q (temp %q), first choice %s taken", h3, join.InterfaceName.SrcName, h1)
	}
	for _, id := range []string{id2, id3} {
		e.call("/NetworkDriver.Leave", EndpointRequest{NetworkID: netID, EndpointID: id}, nil)
		e.call("/NetworkDriver.DeleteEndpoint", EndpointRequest{NetworkID: netID, EndpointID: id}, nil)
	}
	if l := e.kern.names(); len(l) != 1 || l[0] != h1 {
		t.Errorf("pairs left: %v, want only the foreign %s", l, h1)
	}
}
