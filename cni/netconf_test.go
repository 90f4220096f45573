package cni

import (
	"errors"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
)

func TestNetConfErrorsNameTheField(t *testing.T) {
	cases := map[string]string{
		`{"name":"n","mtu":"big","ipam":{"type":"calico-ipam"}}`:                                        "mtu",
		`{"name":"n","mtu":70000,"ipam":{"type":"calico-ipam"}}`:                                        "mtu",
		`{"name":"n","ipam":{}}`:                                                                        "ipam.type",
		`{"ipam":{"type":"calico-ipam"}}`:                                                               "name",
		`{"name":"n","datastore_type":"etcd","ipam":{"type":"calico-ipam"}}`:                            "datastore_type",
		`{"name":"n","etcd_endpoints":"not a url","ipam":{"type":"calico-ipam"}}`:                       "etcd_endpoints",
		`{"name":"n","ipam":{"type":"calico-ipam","assign_ipv4":"false"}}`:                              "assign_ipv4",
		`{"name":"n","ipam":{"type":"calico-ipam","assign_ipv4":"maybe"}}`:                              "ipam",
		`{"name":"n","log_level":"loud","ipam":{"type":"calico-ipam"}}`:                                 "log_level",
		`{"name":"n","ipam":{"type":"calico-ipam","ipv4_pools":"p"}}`:                                   "ipam.ipv4_pools",
		`{"name":"n","container_settings":{"allow_ip_forwarding":"yes"},"ipam":{"type":"calico-ipam"}}`: "container_settings.allow_ip_forwarding",
	}
	for conf, field := range cases {
		_, err := LoadNetConf([]byte(conf))
		var te *types.Error
		if !errors.As(err, &te) || te.Code != types.ErrInvalidNetworkConfig || !strings.Contains(te.Msg, field) {
			t.Errorf("%s: %v, want error 7 naming %s", conf, err, field)
		}
	}
	c, err := LoadNetConf([]byte(`{"name":"n","unknown_field":{"x":1},"ipam":{"type":"calico-ipam","assign_ipv6":true}}`))
	if err != nil || !c.IPAM.AssignIPv6.or(false) {
		t.Errorf("valid netconf with an unknown field: %v", err)
	}
}

func TestArgs(t *testing.T) {
	a, err := ParseArgs("IgnoreUnknown=1;K8S_POD_NAMESPACE=web;K8S_POD_NAME=nginx-1;FOO=bar;IP=10.1.2.3")
	if err != nil || a.PodNamespace != "web" || a.PodName != "nginx-1" || len(a.IPs) != 1 {
		t.Errorf("args = %+v, %v", a, err)
	}
	if _, err := ParseArgs("FOO=bar"); err == nil {
		t.Errorf("unknown argument accepted without IgnoreUnknown")
	}
	if _, err := ParseArgs("IP=10.1.2"); err == nil || !strings.Contains(err.Error(), "10.1.2") {
		t.Errorf("bad IP: %v", err)
	}
}

func TestIdentityNames(t *testing.T) {
	id := newIdentity("node-1", "abcdef0123456789", "eth0", Args{})
	if id.endpoint != "node--1-cni-abcdef0123456789-eth0" || id.hostVeth != "caliabcdef01234" || id.namespace != "default" {
		t.Errorf("cni identity = %+v", id)
	}
	k := newIdentity("node1", "x", "eth0", Args{PodNamespace: "web", PodName: "my-pod"})
	// sha1("web.my-pod")[:11]
	if k.endpoint != "node1-k8s-my--pod-eth0" || k.namespace != "web" || len(k.hostVeth) != 15 || !strings.HasPrefix(k.hostVeth, "cali") {
		t.Errorf("k8s identity = %+v", k)
	}
}
