package libnetwork

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// Requests Docker cannot have meant, and ones the driver cannot carry out,
// are answered {"Err": ...}: a 4xx for a request that is not the
// protocol's, a 200 for a call that failed.
func TestErrors(t *testing.T) {
	e := newEnv(t, nil)
	e.pool("v4", "10.74.0.0/24")
	e.netNames[netID] = "net1"
	for _, tc := range []struct {
		name, path, body string
		code             int
		want             string // in Err
	}{
		{"malformed JSON", "/NetworkDriver.Join", `{"EndpointID":`, 400, "malformed"},
		{"wrong field type", "/IpamDriver.RequestAddress", `{"PoolID":5}`, 400, "malformed"},
		{"unknown path", "/NetworkDriver.Frobnicate", `{}`, 404, "unknown method /NetworkDriver.Frobnicate"},
		{"unknown interface", "/VolumeDriver.Create", `{}`, 404, "unknown method"},
		{"join unknown endpoint", "/NetworkDriver.Join", `{"NetworkID":"` + netID + `","EndpointID":"` + epID + `"}`, 200, "does not exist"},
		{"info unknown endpoint", "/NetworkDriver.EndpointOperInfo", `{"NetworkID":"` + netID + `","EndpointID":"` + epID + `"}`, 200, "does not exist"},
		{"bad endpoint ID", "/NetworkDriver.Leave", `{"NetworkID":"` + netID + `","EndpointID":"../x"}`, 200, "not a Docker endpoint ID"},
		{"missing IDs", "/NetworkDriver.DeleteEndpoint", `{}`, 200, "not a Docker network ID"},
		{"endpoint without address", "/NetworkDriver.CreateEndpoint", `{"NetworkID":"` + netID + `","EndpointID":"` + epID + `","Interface":{}}`, 200, "no address"},
		{"endpoint with a bad address", "/NetworkDriver.CreateEndpoint", `{"NetworkID":"` + netID + `","EndpointID":"` + epID + `","Interface":{"Address":"10.74.0.300/32"}}`, 200, "not an IP address"},
		{"unknown network name", "/NetworkDriver.CreateEndpoint", `{"NetworkID":"abc","EndpointID":"` + epID + `","Interface":{"Address":"10.74.0.3/32"}}`, 200, "name of Docker network abc"},
		{"sub-pool", "/IpamDriver.RequestPool", `{"AddressSpace":"CalicoLocalAddressSpace","Pool":"10.74.0.0/24","SubPool":"10.74.0.0/25"}`, 200, "sub-pools"},
		{"pool options", "/IpamDriver.RequestPool", `{"AddressSpace":"CalicoLocalAddressSpace","Options":{"b":"1","a":"2"}}`, 200, "got a, b"},
		{"subnet not a pool", "/IpamDriver.RequestPool", `{"AddressSpace":"CalicoLocalAddressSpace","Pool":"10.99.0.0/16"}`, 200, "must be the CIDR of a Calico IP pool"},
		{"subnet not a CIDR", "/IpamDriver.RequestPool", `{"Pool":"banana"}`, 200, "not a CIDR"},
		{"gateway address", "/IpamDriver.RequestAddress", `{"PoolID":"CalicoPoolIPv4","Address":"10.74.0.1","Options":{"RequestAddressType":"com.docker.network.gateway"}}`, 200, "--gateway"},
		{"unknown pool ID", "/IpamDriver.RequestAddress", `{"PoolID":"mystery"}`, 200, "unknown pool ID"},
		{"address of the wrong family", "/IpamDriver.RequestAddress", `{"PoolID":"CalicoPoolIPv6","Address":"10.74.0.9"}`, 200, "not of the family"},
		{"address in no pool", "/IpamDriver.RequestAddress", `{"PoolID":"CalicoPoolIPv4","Address":"192.0.2.9"}`, 200, "not in any enabled IP pool"},
		{"no IPv6 pool", "/IpamDriver.RequestAddress", `{"PoolID":"CalicoPoolIPv6"}`, 200, "no usable IP pool"},
		{"release garbage", "/IpamDriver.ReleaseAddress", `{"PoolID":"CalicoPoolIPv4","Address":"x"}`, 200, "not an IP address"},
		{"foreign IPAM", "/NetworkDriver.CreateNetwork", `{"NetworkID":"` + netID + `","IPv4Data":[{"AddressSpace":"LocalDefault","Pool":"172.18.0.0/16","Gateway":"172.18.0.1/16"}]}`, 200, "--ipam-driver calico-ipam"},
		{"internal network", "/NetworkDriver.CreateNetwork", `{"NetworkID":"` + netID + `","Options":{"com.docker.network.internal":true}}`, 200, "--internal"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e.t = t
			code, body := e.post(tc.path, tc.body)
			var r ErrorResponse
			if err := json.Unmarshal([]byte(body), &r); err != nil || code != tc.code || !strings.Contains(r.Err, tc.want) {
				t.Errorf("got %d %s, want %d with Err containing %q", code, body, tc.code, tc.want)
			}
		})
	}
	e.t = t
	if w := e.endpoints(); len(w) != 0 {
		t.Errorf("failed calls wrote endpoints: %v", w)
	}
	if h := e.handles(); len(h) != 0 {
		t.Errorf("failed calls left allocations: %v", h)
	}
	req, _ := http.NewRequest(http.MethodGet, e.url+"/Plugin.Activate", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Content-Type") != contentType {
		t.Errorf("GET answered %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
}
