package cni

import (
	"encoding/json"
	"errors"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/calico-aio/calico-aio/k8s"
	"github.com/calico-aio/calico-aio/store/api"
)

func testPod(annotations map[string]string) k8s.Pod {
	var p k8s.Pod
	p.Metadata.Name, p.Metadata.Namespace, p.Metadata.Annotations = "web", "shop", annotations
	return p
}

func testNamespace(annotations map[string]string) k8s.Namespace {
	var n k8s.Namespace
	n.Metadata.Name, n.Metadata.Annotations = "shop", annotations
	return n
}

func testConf(ipamType string, noIPAM, floating bool) *NetConf {
	c := &NetConf{Name: "k8s-pod-network"}
	c.IPAM.Type = ipamType
	c.IPAM.IPv4Pools = []string{"conf-pool"}
	c.FeatureControl.IPAddrsNoIpam, c.FeatureControl.FloatingIPs = noIPAM, floating
	return c
}

func addrs(ss ...string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}

func TestParseKubePodAccepts(t *testing.T) {
	cases := []struct {
		name          string
		conf          *NetConf
		pod, ns       map[string]string
		want          kubePod
		wantMAC       string
		wantFloatings []netip.Addr
	}{
		{name: "no annotations", conf: testConf("calico-ipam", false, false)},
		{name: "ipAddrs", conf: testConf("calico-ipam", false, false),
			pod:  map[string]string{annotIPAddrs: `["10.1.2.3", "fd00::3"]`},
			want: kubePod{ipAddrs: addrs("10.1.2.3", "fd00::3")}},
		{name: "ipAddrsNoIpam enabled", conf: testConf("calico-ipam", true, false),
			pod:  map[string]string{annotIPAddrsNoIpam: `["192.0.2.7"]`},
			want: kubePod{noIPAM: addrs("192.0.2.7")}},
		{name: "pod pools win over the namespace's", conf: testConf("calico-ipam", false, false),
			pod:  map[string]string{annotIPv4Pools: `["pod-pool"]`},
			ns:   map[string]string{annotIPv4Pools: `["ns-pool"]`, annotIPv6Pools: `["ns-pool6", "fd00:1::/64"]`},
			want: kubePod{pools4: []string{"pod-pool"}, pools6: []string{"ns-pool6", "fd00:1::/64"}}},
		{name: "namespace pools", conf: testConf("calico-ipam", false, false),
			ns:   map[string]string{annotIPv4Pools: `["10.9.0.0/24"]`},
			want: kubePod{pools4: []string{"10.9.0.0/24"}}},
		{name: "pools are calico-ipam's only", conf: testConf("host-local", false, false),
			pod: map[string]string{annotIPv4Pools: `not even JSON`}},
		{name: "floating IPs enabled", conf: testConf("calico-ipam", false, true),
			pod:  map[string]string{annotFloatingIPs: `["203.0.113.9","2001:db8::9"]`},
			want: kubePod{floating: addrs("203.0.113.9", "2001:db8::9")}},
		{name: "hwAddr", conf: testConf("host-local", false, false),
			pod: map[string]string{annotHwAddr: "c2:b0:57:49:47:f1"}, wantMAC: "c2:b0:57:49:47:f1"},
		// As in Calico: host bits cleared, both families, any IPAM.
		{name: "allowedSourcePrefixes", conf: testConf("host-local", false, false),
			pod:  map[string]string{annotSourcePrefixes: `["10.0.0.0/24", "192.0.2.77/28", "2001:db8::1:5/112", "198.51.100.9/32"]`},
			want: kubePod{spoofable: []string{"10.0.0.0/24", "192.0.2.64/28", "2001:db8::1:0/112", "198.51.100.9/32"}}},
		{name: "allowedSourcePrefixes empty list", conf: testConf("calico-ipam", false, false),
			pod: map[string]string{annotSourcePrefixes: `[]`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			kp, err := parseKubePod(c.conf, testPod(c.pod), testNamespace(c.ns))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(kp.ipAddrs, c.want.ipAddrs) || !slices.Equal(kp.noIPAM, c.want.noIPAM) ||
				!slices.Equal(kp.pools4, c.want.pools4) || !slices.Equal(kp.pools6, c.want.pools6) ||
				!slices.Equal(kp.floating, c.want.floating) || !slices.Equal(kp.spoofable, c.want.spoofable) {
				t.Errorf("got ipAddrs %v noIPAM %v pools %v %v floating %v spoofable %v, want %+v", kp.ipAddrs, kp.noIPAM, kp.pools4, kp.pools6, kp.floating, kp.spoofable, c.want)
			}
			if got := kp.mac.String(); got != c.wantMAC {
				t.Errorf("MAC %q, want %q", got, c.wantMAC)
			}
		})
	}
}

func TestParseKubePodRefuses(t *testing.T) {
	cases := []struct {
		name    string
		conf    *NetConf
		pod, ns map[string]string
		want    string // in the message, besides the annotation
	}{
		{"both address annotations", testConf("calico-ipam", true, false),
			map[string]string{annotIPAddrs: `["10.1.2.3"]`, annotIPAddrsNoIpam: `["10.1.2.3"]`}, nil, annotIPAddrsNoIpam},
		{"ipAddrsNoIpam not enabled", testConf("calico-ipam", false, false),
			map[string]string{annotIPAddrsNoIpam: `["10.1.2.3"]`}, nil, "ip_addrs_no_ipam"},
		{"ipAddrsNoIpam with host-local", testConf("host-local", true, false),
			map[string]string{annotIPAddrsNoIpam: `["10.1.2.3"]`}, nil, "host-local"},
		{"ipAddrs with host-local", testConf("host-local", false, false),
			map[string]string{annotIPAddrs: `["10.1.2.3"]`}, nil, "host-local"},
		{"ipAddrs not JSON", testConf("calico-ipam", false, false),
			map[string]string{annotIPAddrs: `10.1.2.3`}, nil, "JSON list"},
		{"ipAddrs not an address", testConf("calico-ipam", false, false),
			map[string]string{annotIPAddrs: `["10.1.2"]`}, nil, "not an IP address"},
		{"ipAddrs two IPv4", testConf("calico-ipam", false, false),
			map[string]string{annotIPAddrs: `["10.1.2.3","10.1.2.4"]`}, nil, "at most one IPv4"},
		{"ipAddrs empty list", testConf("calico-ipam", false, false),
			map[string]string{annotIPAddrs: `[]`}, nil, "empty"},
		{"floating IPs not enabled", testConf("calico-ipam", false, false),
			map[string]string{annotFloatingIPs: `["203.0.113.9"]`}, nil, "floating_ips"},
		{"floating IP not an address", testConf("calico-ipam", false, true),
			map[string]string{annotFloatingIPs: `["nope"]`}, nil, "not an IP address"},
		{"hwAddr not a MAC", testConf("calico-ipam", false, false),
			map[string]string{annotHwAddr: "zz:zz"}, nil, "not a MAC"},
		{"hwAddr multicast", testConf("calico-ipam", false, false),
			map[string]string{annotHwAddr: "01:00:5e:00:00:01"}, nil, "multicast"},
		{"hwAddr too long", testConf("calico-ipam", false, false),
			map[string]string{annotHwAddr: "00:00:00:00:fe:80:00:00:00:00:00:00:02:00:5e:10:00:00:00:01"}, nil, "6-byte"},
		{"allowedSourcePrefixes not JSON", testConf("calico-ipam", false, false),
			map[string]string{annotSourcePrefixes: `10.0.0.0/24`}, nil, "allowedSourcePrefixes: \"10.0.0.0/24\" is not a JSON list"},
		{"allowedSourcePrefixes not strings", testConf("calico-ipam", false, false),
			map[string]string{annotSourcePrefixes: `[24]`}, nil, "allowedSourcePrefixes: \"[24]\" is not a JSON list"},
		{"allowedSourcePrefixes bad CIDR", testConf("calico-ipam", false, false),
			map[string]string{annotSourcePrefixes: `["10.0.0.0/24","10.0.0.0/33"]`}, nil, "allowedSourcePrefixes: \"10.0.0.0/33\" is not a CIDR"},
		{"allowedSourcePrefixes bare address", testConf("calico-ipam", false, false),
			map[string]string{annotSourcePrefixes: `["10.0.0.1"]`}, nil, "allowedSourcePrefixes: \"10.0.0.1\" is not a CIDR"},
		{"pod pools not a list", testConf("calico-ipam", false, false),
			map[string]string{annotIPv4Pools: `"p"`}, nil, "pod"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := parseKubePod(c.conf, testPod(c.pod), testNamespace(c.ns))
			var te *types.Error
			if !errors.As(err, &te) || te.Code != types.ErrInvalidNetworkConfig {
				t.Fatalf("got %v, want CNI error 7", err)
			}
			if !strings.Contains(te.Msg, "pod shop/web") || !strings.Contains(te.Msg, "cni.projectcalico.org/") || !strings.Contains(te.Msg, c.want) {
				t.Errorf("message %q should name the pod, the annotation and %q", te.Msg, c.want)
			}
		})
	}
	// A bad namespace annotation names the namespace.
	_, err := parseKubePod(testConf("calico-ipam", false, false), testPod(nil), testNamespace(map[string]string{annotIPv6Pools: `[1]`}))
	if err == nil || !strings.Contains(err.Error(), "namespace shop: annotation "+annotIPv6Pools) {
		t.Errorf("bad namespace annotation: %v", err)
	}
}

func TestKubePodIPAMInputs(t *testing.T) {
	conf := testConf("calico-ipam", false, false)
	conf.IPAM.IPv6Pools = []string{"conf6"}
	args := Args{IPs: addrs("10.0.0.1"), PodName: "web"}
	kp := &kubePod{pools4: []string{"p4"}, ipAddrs: addrs("10.0.0.9")}
	c, a := kp.ipamInputs(conf, args)
	if !slices.Equal(c.IPAM.IPv4Pools, []string{"p4"}) || !slices.Equal(c.IPAM.IPv6Pools, []string{"conf6"}) ||
		!slices.Equal(a.IPs, addrs("10.0.0.9")) || a.PodName != "web" {
		t.Errorf("inputs: pools %v %v ips %v", c.IPAM.IPv4Pools, c.IPAM.IPv6Pools, a.IPs)
	}
	if conf.IPAM.IPv4Pools[0] != "conf-pool" || args.IPs[0] != netip.MustParseAddr("10.0.0.1") {
		t.Errorf("ipamInputs changed its inputs")
	}
	var none *kubePod
	if c, a := none.ipamInputs(conf, args); c != conf || !slices.Equal(a.IPs, args.IPs) {
		t.Errorf("a plain CNI pod's inputs changed")
	}
}

func TestKubePodApplyTo(t *testing.T) {
	pod := testPod(nil)
	pod.Metadata.Labels = map[string]string{"app": "web", api.LabelNamespace: "forged"}
	pod.Spec.ServiceAccountName = "shopper"
	pod.Spec.Containers = []k8s.Container{{Name: "c", Ports: []k8s.ContainerPort{{Name: "http", ContainerPort: 8080}}}}
	kp := &kubePod{pod: pod, floating: addrs("203.0.113.9", "2001:db8::9"), spoofable: []string{"10.0.0.0/24", "2001:db8:1::/64"}}
	var w api.WorkloadEndpoint
	if err := kp.applyTo(&w, addrs("10.1.0.5", "fd00::5")); err != nil {
		t.Fatal(err)
	}
	wantLabels := map[string]string{"app": "web", api.LabelNamespace: "shop", api.LabelOrchestrator: "k8s", api.LabelServiceAccount: "shopper"}
	if !reflect.DeepEqual(w.Metadata.Labels, wantLabels) {
		t.Errorf("labels %v, want %v", w.Metadata.Labels, wantLabels)
	}
	wantNATs := []api.IPNAT{{InternalIP: "10.1.0.5", ExternalIP: "203.0.113.9"}, {InternalIP: "fd00::5", ExternalIP: "2001:db8::9"}}
	if !reflect.DeepEqual(w.Spec.IPNATs, wantNATs) {
		t.Errorf("ipNATs %v, want %v", w.Spec.IPNATs, wantNATs)
	}
	if w.Spec.ServiceAccountName != "shopper" || len(w.Spec.Ports) != 1 || w.Spec.Ports[0].Name != "http" {
		t.Errorf("spec: %+v", w.Spec)
	}
	if want := []string{"10.0.0.0/24", "2001:db8:1::/64"}; !slices.Equal(w.Spec.AllowSpoofedSourcePrefixes, want) {
		t.Errorf("allowSpoofedSourcePrefixes %v, want %v", w.Spec.AllowSpoofedSourcePrefixes, want)
	}
	// A floating IPv6 address needs a pod IPv6 address.
	if err := kp.applyTo(&w, addrs("10.1.0.5")); err == nil || !strings.Contains(err.Error(), "2001:db8::9") {
		t.Errorf("floating IPv6 without a pod IPv6 address: %v", err)
	}
}

func TestReplacePodCIDR(t *testing.T) {
	spec := k8s.NodeSpec{PodCIDR: "10.244.1.0/24", PodCIDRs: []string{"10.244.1.0/24", "fd00:244:1::/64"}}
	calls := 0
	node := func() (k8s.NodeSpec, error) { calls++; return spec, nil }
	in := `{"cniVersion":"1.0.0","name":"n","type":"calico","custom":{"keep":true},"big":12345678901234567890,
"ipam":{"type":"host-local","subnet":"usePodCidr","routes":[{"dst":"0.0.0.0/0"}],
"ranges":[[{"subnet":"usePodCidrIPv6"}],[{"subnet":"usePodCidr","gateway":"10.244.1.1"}],[{"subnet":"192.0.2.0/24"}]]}}`
	out, err := replacePodCIDR([]byte(in), node)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Custom map[string]bool `json:"custom"`
		IPAM   struct {
			Subnet string                `json:"subnet"`
			Routes []map[string]string   `json:"routes"`
			Ranges [][]map[string]string `json:"ranges"`
		} `json:"ipam"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	if got.IPAM.Subnet != "10.244.1.0/24" || got.IPAM.Ranges[0][0]["subnet"] != "fd00:244:1::/64" ||
		got.IPAM.Ranges[1][0]["subnet"] != "10.244.1.0/24" || got.IPAM.Ranges[1][0]["gateway"] != "10.244.1.1" ||
		got.IPAM.Ranges[2][0]["subnet"] != "192.0.2.0/24" || !got.Custom["keep"] || len(got.IPAM.Routes) != 1 {
		t.Errorf("rewritten: %s", out)
	}
	if !strings.Contains(string(out), `"big":12345678901234567890`) {
		t.Errorf("a number changed: %s", out)
	}
	if calls != 1 {
		t.Errorf("node read %d times, want once", calls)
	}

	// Nothing to replace: nil, and no node read.
	calls = 0
	if out, err := replacePodCIDR([]byte(`{"ipam":{"type":"host-local","subnet":"10.1.0.0/16"}}`), node); err != nil || out != nil || calls != 0 {
		t.Errorf("plain subnet: %s %v, %d node reads", out, err, calls)
	}

	// A node without the family's CIDR is a clear error.
	spec = k8s.NodeSpec{PodCIDR: "10.244.1.0/24"}
	_, err = replacePodCIDR([]byte(`{"ipam":{"type":"host-local","subnet":"usePodCidrIPv6"}}`), node)
	if err == nil || !strings.Contains(err.Error(), "no IPv6 spec.podCIDR") {
		t.Errorf("node without an IPv6 CIDR: %v", err)
	}
	spec = k8s.NodeSpec{}
	if _, err = replacePodCIDR([]byte(`{"ipam":{"type":"host-local","subnet":"usePodCidr"}}`), node); err == nil {
		t.Errorf("node without a pod CIDR: no error")
	}
}

func TestDelIPAMStdinNeedsNoAPI(t *testing.T) {
	conf := testConf("host-local", false, false)
	in := []byte(`{"ipam":{"type":"host-local","subnet":"usePodCidr","ranges":[[{"subnet":"usePodCidrIPv6"}]]}}`)
	out := delIPAMStdin(conf, in)
	if !strings.Contains(string(out), `"subnet":"0.0.0.0/0"`) || !strings.Contains(string(out), `"subnet":"::/0"`) {
		t.Errorf("DEL stdin: %s", out)
	}
	plain := []byte(`{"ipam":{"type":"host-local","subnet":"10.1.0.0/16"}}`)
	if out := delIPAMStdin(conf, plain); string(out) != string(plain) {
		t.Errorf("plain subnet changed: %s", out)
	}
	if err := checkPodCIDRWithoutAPI(conf, in); err == nil || !strings.Contains(err.Error(), "kubernetes.kubeconfig") {
		t.Errorf("usePodCidr without the API: %v", err)
	}
	if err := checkPodCIDRWithoutAPI(conf, plain); err != nil {
		t.Errorf("plain subnet: %v", err)
	}
}

func TestUsesKubernetes(t *testing.T) {
	k8sID := newIdentity("n", "c", "eth0", Args{PodNamespace: "shop", PodName: "web"})
	cniID := newIdentity("n", "c", "eth0", Args{})
	cases := []struct {
		kubeconfig, policy string
		id                 identity
		want               bool
	}{
		{"/etc/kube.conf", "", k8sID, true},
		{"", "k8s", k8sID, true},
		{"", "", k8sID, false},
		{"/etc/kube.conf", "k8s", cniID, false},
	}
	for _, c := range cases {
		s := &session{conf: &NetConf{}}
		s.conf.Kubernetes.Kubeconfig, s.conf.Policy.Type = c.kubeconfig, c.policy
		if got := s.usesKubernetes(c.id); got != c.want {
			t.Errorf("kubeconfig %q policy %q %s: %v, want %v", c.kubeconfig, c.policy, c.id.orchestrator, got, c.want)
		}
	}
}
