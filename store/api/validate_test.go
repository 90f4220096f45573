package api

import (
	"errors"
	"strings"
	"testing"
)

// obj builds a resource JSON document from a kind, a metadata body and a
// spec body.
func obj(kind, meta, spec string) string {
	return `{"kind":"` + kind + `","apiVersion":"projectcalico.org/v3","metadata":{` + meta + `},"spec":{` + spec + `}}`
}

const (
	named  = `"name":"x"`
	inNS   = `"name":"x","namespace":"ns1"`
	wepOK  = `"interfaceName":"cali1234","ipNetworks":["10.0.0.1/32"]`
	tcpDst = `{"action":"Allow","protocol":"TCP","destination":`
)

func rules(r string) string { return `"ingress":[` + r + `]` }

func TestValidateGood(t *testing.T) {
	for _, doc := range []string{
		obj("IPPool", named, `"cidr":"10.0.0.0/16"`),
		obj("IPPool", named, `"cidr":"fd00::/48","blockSize":116,"vxlanMode":"Always"`),
		obj("IPPool", named, `"cidr":"10.1.0.0/24","allowedUses":["LoadBalancer"],"nodeSelector":"all()"`),
		obj("IPPool", named, `"cidr":"10.2.0.0/28","disabled":true`),
		obj("Node", named, `"bgp":{"ipv4Address":"10.0.0.1","ipv6Address":"fd00::1/64","asNumber":65001,"routeReflectorClusterID":"224.0.0.1"},"addresses":[{"address":"10.0.0.1/24","type":"InternalIP"}],"vxlanTunnelMACAddr":"66:ab:00:00:00:01"`),
		obj("WorkloadEndpoint", inNS, wepOK+`,"mac":"ee:ee:ee:ee:ee:ee","ports":[{"name":"http","protocol":"TCP","port":80,"hostPort":0,"hostIP":""}],"ipNATs":[{"internalIP":"10.0.0.1","externalIP":"172.16.0.1"}]`),
		obj("HostEndpoint", named, `"node":"n1","interfaceName":"*"`),
		obj("HostEndpoint", named, `"node":"n1","expectedIPs":["10.0.0.1","fd00::1"],"ports":[{"name":"ssh","protocol":"TCP","port":22}]`),
		obj("Profile", named, rules(`{"action":"Allow","protocol":"UDP","source":{"nets":["10.0.0.0/8"]},"destination":{"ports":[53,"1000:2000","dns"]}}`)),
		obj("Profile", named, rules(`{"action":"Allow","protocol":"ICMP","icmp":{"type":8,"code":0},"ipVersion":4}`)),
		obj("Profile", named, rules(`{"action":"Deny","protocol":132,"destination":{"ports":[9]}}`)),
		obj("NetworkPolicy", `"name":"default.allow-web","namespace":"prod"`, `"selector":"app == 'web'","types":["Ingress"],`+rules(`{"action":"Pass"}`)),
		obj("NetworkPolicy", `"name":"knp.default.a.b","namespace":"prod"`, ``),
		obj("GlobalNetworkPolicy", `"name":"security.block"`, `"doNotTrack":true,"applyOnForward":true,"namespaceSelector":"has(team)"`),
		obj("GlobalNetworkPolicy", named, rules(`{"action":"Allow","source":{"namespaceSelector":"global()"}}`)),
		obj("NetworkSet", inNS, `"nets":["10.0.0.0/8","192.168.1.1"]`),
		obj("GlobalNetworkSet", named, `"nets":["fd00::/64"]`),
		obj("BGPPeer", named, `"peerIP":"192.0.2.1","asNumber":65002,"node":"n1","keepaliveTime":"30s"`),
		obj("BGPPeer", named, `"peerIP":"[fd00::1]:1179","asNumber":"1.10"`),
		obj("BGPPeer", named, `"peerIP":"192.0.2.1:179","asNumber":65002,"nodeSelector":"rack == 'a'"`),
		obj("BGPPeer", named, `"peerSelector":"route-reflector == 'true'","nodeSelector":"all()","password":{"secretKeyRef":{"name":"s","key":"k"}}`),
		obj("BGPConfiguration", `"name":"default"`, `"nodeToNodeMeshEnabled":false,"asNumber":64512,"serviceClusterIPs":[{"cidr":"10.96.0.0/12"}],"communities":[{"name":"c1","value":"65001:100"}],"prefixAdvertisements":[{"cidr":"10.0.0.0/8","communities":["c1","65001:200:300"]}],"listenPort":179`),
		obj("FelixConfiguration", `"name":"default"`, `"logSeverityScreen":"Info","failsafeInboundHostPorts":[{"protocol":"TCP","port":22}],"vxlanVNI":4096,"routeTableRange":{"min":1,"max":250},"iptablesRefreshInterval":"90s"`),
		obj("ClusterInformation", `"name":"default"`, `"clusterGUID":"abc","datastoreReady":true`),
		obj("Tier", `"name":"security"`, `"order":100,"defaultAction":"Pass"`),
	} {
		r, err := Decode([]byte(doc))
		if err != nil {
			t.Errorf("Decode(%s): %v", doc, err)
			continue
		}
		r.Default()
		// Well-formed but unsupported fields are refused too; that
		// refusal is TestUnsupportedRefusedAtWrite's. Here every other
		// check must pass.
		if err := r.Validate(); err != nil && !onlyUnsupported(err) {
			t.Errorf("%s\n  unexpected error: %v", doc, err)
		}
	}
}

func TestValidateBad(t *testing.T) {
	for _, tc := range []struct {
		doc  string
		want []string // each must appear in the error text
	}{
		// Metadata.
		{obj("IPPool", ``, `"cidr":"10.0.0.0/16"`), []string{"metadata.name: is required"}},
		{obj("IPPool", `"name":"Bad_Name"`, `"cidr":"10.0.0.0/16"`), []string{`metadata.name: "Bad_Name"`}},
		{obj("IPPool", `"name":"x","namespace":"ns"`, `"cidr":"10.0.0.0/16"`), []string{"metadata.namespace"}},
		{obj("WorkloadEndpoint", named, wepOK), []string{"metadata.namespace: is required"}},
		{obj("NetworkSet", `"name":"x","namespace":"Bad.NS"`, ``), []string{`metadata.namespace: "Bad.NS"`}},
		{obj("IPPool", `"name":"x","labels":{"bad key!":"v","ok":"bad value!"}`, `"cidr":"10.0.0.0/16"`),
			[]string{`metadata.labels: "bad key!"`, `metadata.labels[ok]: "bad value!"`}},
		{obj("NetworkPolicy", `"name":"a.b.c","namespace":"n"`, ``), []string{`metadata.name: "a.b.c"`}},
		{obj("Tier", `"name":"a.b"`, ``), []string{`metadata.name: "a.b"`}},
		{obj("GlobalNetworkSet", `"name":"x","labels":{"projectcalico.org/namespace":"a"}`, ``), []string{"metadata.labels", "reserved"}},
		// IPPool.
		{obj("IPPool", named, ``), []string{"spec.cidr: is required"}},
		{obj("IPPool", named, `"cidr":"10.0.0.0/33"`), []string{`spec.cidr: "10.0.0.0/33" is not a valid CIDR`}},
		{obj("IPPool", named, `"cidr":"169.254.0.0/24"`), []string{"spec.cidr", "link-local"}},
		{obj("IPPool", named, `"cidr":"10.0.0.0/16","blockSize":19`), []string{`spec.blockSize: "19" must be between 20 and 32`}},
		{obj("IPPool", named, `"cidr":"fd00::/48","blockSize":26`), []string{`spec.blockSize: "26" must be between 116 and 128`}},
		{obj("IPPool", named, `"cidr":"10.0.0.0/28"`), []string{`spec.blockSize: "26"`, "prefix length 28"}},
		{obj("IPPool", named, `"cidr":"10.0.0.0/16","ipipMode":"Sometimes"`), []string{`spec.ipipMode: "Sometimes"`}},
		{obj("IPPool", named, `"cidr":"10.0.0.0/16","ipipMode":"Always","vxlanMode":"CrossSubnet"`), []string{"spec.vxlanMode", "ipipMode"}},
		{obj("IPPool", named, `"cidr":"fd00::/48","ipipMode":"Always"`), []string{"spec.ipipMode", "IPv6"}},
		{obj("IPPool", named, `"cidr":"10.0.0.0/16","nodeSelector":"a =="`), []string{`spec.nodeSelector: "a =="`}},
		{obj("IPPool", named, `"cidr":"10.0.0.0/16","allowedUses":["Workload","Gateway"]`), []string{`spec.allowedUses[1]: "Gateway"`}},
		{obj("IPPool", named, `"cidr":"10.0.0.0/16","allowedUses":["Workload","LoadBalancer"]`), []string{`spec.allowedUses[0]: "Workload"`}},
		{obj("IPPool", named, `"cidr":"10.0.0.0/16","assignmentMode":"Sometimes"`), []string{"spec.assignmentMode"}},
		// Node.
		{obj("Node", named, `"bgp":{"ipv4Address":"fd00::1/64"}`), []string{`spec.bgp.ipv4Address: "fd00::1/64"`}},
		{obj("Node", named, `"bgp":{"routeReflectorClusterID":"not-an-ip"}`), []string{`spec.bgp.routeReflectorClusterID: "not-an-ip"`}},
		{obj("Node", named, `"bgp":{}`), []string{"spec.bgp: must not be empty"}},
		{obj("Node", named, `"addresses":[{"address":"10.0.0.1"},{"address":"nope","type":"Other"}]`),
			[]string{`spec.addresses[1].address: "nope"`, `spec.addresses[1].type: "Other"`}},
		{obj("Node", named, `"vxlanTunnelMACAddr":"zz:zz"`), []string{"spec.vxlanTunnelMACAddr"}},
		// WorkloadEndpoint.
		{obj("WorkloadEndpoint", inNS, `"interfaceName":"cali1234","ipNetworks":["10.0.0.0/24","bad"]`),
			[]string{`spec.ipNetworks[0]: "10.0.0.0/24" must be a single address`, `spec.ipNetworks[1]: "bad"`}},
		{obj("WorkloadEndpoint", inNS, `"interfaceName":"cali0123456789abcdef"`), []string{"spec.interfaceName"}},
		{obj("WorkloadEndpoint", inNS, ``), []string{"spec.interfaceName: is required"}},
		{obj("WorkloadEndpoint", inNS, wepOK+`,"mac":"not-a-mac"`), []string{`spec.mac: "not-a-mac"`}},
		{obj("WorkloadEndpoint", inNS, wepOK+`,"ports":[{"name":"x","protocol":"ICMP","port":0,"hostPort":0,"hostIP":""}]`),
			[]string{"spec.ports[0].protocol", "spec.ports[0].port"}},
		{obj("WorkloadEndpoint", inNS, wepOK+`,"ipNATs":[{"internalIP":"10.9.9.9","externalIP":"fd00::1"}]`),
			[]string{"spec.ipNATs[0].externalIP", "spec.ipNATs[0].internalIP"}},
		{obj("WorkloadEndpoint", inNS, wepOK+`,"ipv4Gateway":"fd00::1"`), []string{"spec.ipv4Gateway"}},
		// HostEndpoint.
		{obj("HostEndpoint", named, ``), []string{"spec.node: is required", "spec.interfaceName"}},
		{obj("HostEndpoint", named, `"node":"n","expectedIPs":["10.0.0.300"]`), []string{`spec.expectedIPs[0]: "10.0.0.300"`}},
		// Rules.
		{obj("Profile", named, rules(`{"action":"Accept"}`)), []string{`spec.ingress[0].action: "Accept"`}},
		{obj("Profile", named, rules(`{}`)), []string{"spec.ingress[0].action: is required"}},
		{obj("Profile", named, rules(tcpDst+`{"ports":[70000]}}`)), []string{`spec.ingress[0].destination.ports[0]: "70000"`}},
		{obj("Profile", named, rules(tcpDst+`{"ports":["2000:1000"]}}`)), []string{`spec.ingress[0].destination.ports[0]: "2000:1000"`}},
		{obj("Profile", named, rules(`{"action":"Allow","protocol":"ICMP","destination":{"ports":[80]}}`)),
			[]string{"spec.ingress[0].destination.ports: requires protocol"}},
		{obj("Profile", named, rules(`{"action":"Allow","source":{"notPorts":[80]}}`)), []string{"spec.ingress[0].source.notPorts"}},
		{obj("Profile", named, rules(`{"action":"Allow","protocol":"tcp"}`)), []string{`spec.ingress[0].protocol: "tcp"`}},
		{obj("Profile", named, rules(`{"action":"Allow","notProtocol":0}`)), []string{`spec.ingress[0].notProtocol: "0"`}},
		{obj("Profile", named, rules(`{"action":"Allow","protocol":"TCP","icmp":{"type":8}}`)), []string{"spec.ingress[0].icmp: requires protocol ICMP"}},
		{obj("Profile", named, rules(`{"action":"Allow","protocol":"ICMP","icmp":{"code":1}}`)), []string{"spec.ingress[0].icmp.code", "requires an ICMP type"}},
		{obj("Profile", named, rules(`{"action":"Allow","protocol":"ICMP","icmp":{"type":255}}`)), []string{`spec.ingress[0].icmp.type: "255"`}},
		{obj("Profile", named, rules(`{"action":"Allow","protocol":"ICMP","ipVersion":6}`)), []string{"spec.ingress[0].ipVersion", "ICMP"}},
		{obj("Profile", named, rules(`{"action":"Allow","ipVersion":5}`)), []string{`spec.ingress[0].ipVersion: "5"`}},
		{obj("Profile", named, rules(`{"action":"Allow","ipVersion":4,"source":{"nets":["fd00::/64"]}}`)), []string{`spec.ingress[0].source.nets[0]: "fd00::/64"`}},
		{obj("Profile", named, rules(`{"action":"Allow","source":{"nets":["10.0.0.0/8"]},"destination":{"notNets":["fd00::/64"]}}`)),
			[]string{"spec.ingress[0]: mixes IPv4 and IPv6"}},
		{obj("Profile", named, rules(`{"action":"Allow","source":{"nets":["10.0.0.1/8","garbage"]}}`)),
			[]string{`spec.ingress[0].source.nets[0]: "10.0.0.1/8" is not strictly masked`, `spec.ingress[0].source.nets[1]: "garbage"`}},
		{obj("Profile", named, `"egress":[{"action":"Allow","destination":{"selector":"a =="}}]`), []string{`spec.egress[0].destination.selector: "a =="`}},
		{obj("Profile", named, rules(`{"action":"Allow","source":{"selector":"global()"}}`)), []string{"spec.ingress[0].source.selector"}},
		{obj("Profile", named, `"labelsToApply":{"a b":"c"}`), []string{`spec.labelsToApply: "a b"`}},
		// Policies.
		{obj("NetworkPolicy", inNS, `"selector":"has(a"`), []string{`spec.selector: "has(a"`}},
		{obj("NetworkPolicy", inNS, `"types":["Ingress","Ingress"]`), []string{`spec.types[1]: "Ingress" is listed twice`}},
		{obj("NetworkPolicy", inNS, `"types":["Both"]`), []string{`spec.types[0]: "Both"`}},
		{obj("NetworkPolicy", inNS, `"tier":"My.Tier"`), []string{`spec.tier: "My.Tier"`}},
		{obj("GlobalNetworkPolicy", named, `"doNotTrack":true,"preDNAT":true`), []string{"spec.preDNAT", "spec.applyOnForward"}},
		{obj("GlobalNetworkPolicy", named, `"preDNAT":true,"applyOnForward":true,"egress":[{"action":"Allow"}]`), []string{"spec.egress", "spec.types[0]"}},
		{obj("GlobalNetworkPolicy", named, `"namespaceSelector":"global()"`), []string{"spec.namespaceSelector"}},
		// Network sets.
		{obj("NetworkSet", inNS, `"nets":["10.0.0.0/8","300.0.0.0/8"]`), []string{`spec.nets[1]: "300.0.0.0/8"`}},
		// BGP.
		{obj("BGPPeer", named, `"peerIP":"192.0.2.1:0","asNumber":1`), []string{`spec.peerIP: "192.0.2.1:0"`}},
		{obj("BGPPeer", named, `"peerIP":"fd00::1:179","asNumber":1`), []string{}}, // a valid bare IPv6 address
		{obj("BGPPeer", named, `"peerIP":"example.com","asNumber":1`), []string{`spec.peerIP: "example.com"`}},
		{obj("BGPPeer", named, `"node":"n1","nodeSelector":"all()","peerIP":"192.0.2.1"`), []string{`spec.node: "n1" must be empty when nodeSelector`}},
		{obj("BGPPeer", named, `"peerSelector":"all()","peerIP":"192.0.2.1","asNumber":65000`), []string{"spec.peerIP", "spec.asNumber"}},
		{obj("BGPPeer", named, `"sourceAddress":"Any","password":{"secretKeyRef":{"name":"s"}}`), []string{"spec.sourceAddress", "spec.password.secretKeyRef.key"}},
		{obj("BGPConfiguration", named, `"logSeverityScreen":"Loud","serviceClusterIPs":[{"cidr":"10.96.0.1/12"}]`),
			[]string{`spec.logSeverityScreen: "Loud"`, `spec.serviceClusterIPs[0].cidr: "10.96.0.1/12"`}},
		{obj("BGPConfiguration", named, `"communities":[{"name":"c","value":"70000:1"}],"prefixAdvertisements":[{"cidr":"10.0.0.0/8","communities":["nope"]}]`),
			[]string{`spec.communities[0].value: "70000:1"`, `spec.prefixAdvertisements[0].communities[0]: "nope"`}},
		{obj("BGPConfiguration", named, `"nodeToNodeMeshEnabled":false,"nodeMeshMaxRestartTime":"10s"`), []string{"spec.nodeMeshMaxRestartTime"}},
		// Felix, tiers.
		{obj("FelixConfiguration", named, `"chainInsertMode":"Middle","healthPort":0,"natOutgoingAddress":"fd00::1","failsafeInboundHostPorts":[{"protocol":"ICMP","port":1}]`),
			[]string{"spec.chainInsertMode", `spec.healthPort: "0"`, "spec.natOutgoingAddress", `spec.failsafeInboundHostPorts[0].protocol: "ICMP"`}},
		{obj("FelixConfiguration", named, `"routeTableRange":{"min":10,"max":5},"mtuIfacePattern":"(("`), []string{"spec.routeTableRange", "spec.mtuIfacePattern"}},
		{obj("Tier", `"name":"default"`, `"order":5`), []string{`spec.order: "5" must be 1000000`}},
		{obj("Tier", `"name":"t"`, `"defaultAction":"Allow"`), []string{`spec.defaultAction: "Allow"`}},
	} {
		r, err := Decode([]byte(tc.doc))
		if err != nil {
			t.Errorf("Decode(%s): %v", tc.doc, err)
			continue
		}
		r.Default()
		err = r.Validate()
		if len(tc.want) == 0 {
			if err != nil {
				t.Errorf("%s\n  unexpected error: %v", tc.doc, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%s\n  no error; want %q", tc.doc, tc.want)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s\n  error %q\n  does not contain %q", tc.doc, err, w)
			}
		}
		var fe *FieldError
		if !errors.As(err, &fe) {
			t.Errorf("%s: error is not a FieldError: %v", tc.doc, err)
		}
	}
}

func TestFieldErrorFormat(t *testing.T) {
	for _, tc := range []struct {
		e    FieldError
		want string
	}{
		{FieldError{"spec.cidr", "10.0.0.0/33", "is not a valid CIDR"}, `spec.cidr: "10.0.0.0/33" is not a valid CIDR`},
		{FieldError{"metadata.name", "", "is required"}, `metadata.name: is required`},
	} {
		if got := tc.e.Error(); got != tc.want {
			t.Errorf("got %q, want %q", got, tc.want)
		}
	}
	// Every bad field is reported, not just the first.
	p := &IPPool{Spec: IPPoolSpec{CIDR: "bad", IPIPMode: "x", VXLANMode: "y"}}
	var n int
	for _, e := range p.Validate().(interface{ Unwrap() []error }).Unwrap() {
		if _, ok := e.(*FieldError); ok {
			n++
		}
	}
	if n != 4 {
		t.Errorf("got %d field errors, want 4 (name, cidr, ipipMode, vxlanMode): %v", n, p.Validate())
	}
}

func TestExportedValidators(t *testing.T) {
	if ValidateName("node1.example") != nil || ValidateName("Node1") == nil || ValidateName(strings.Repeat("a", 254)) == nil {
		t.Error("ValidateName")
	}
	if ValidateNamespace("kube-system") != nil || ValidateNamespace("a.b") == nil {
		t.Error("ValidateNamespace")
	}
	if ValidateLabels(map[string]string{"projectcalico.org/namespace": "default", "a": ""}) != nil ||
		ValidateLabels(map[string]string{"a": strings.Repeat("v", 64)}) == nil {
		t.Error("ValidateLabels")
	}
	if ValidateSelector("") != nil || ValidateSelector("a ==") == nil {
		t.Error("ValidateSelector")
	}
	for in, port := range map[string]uint16{"192.0.2.1": 0, "192.0.2.1:179": 179, "[fd00::1]:1179": 1179, "fd00::1": 0} {
		if _, p, err := ParsePeerIP(in); err != nil || p != port {
			t.Errorf("ParsePeerIP(%q) = %d, %v", in, p, err)
		}
	}
	for _, in := range []string{"", "host:179", "192.0.2.1:0", "192.0.2.1:70000", "fe80::1%eth0"} {
		if _, _, err := ParsePeerIP(in); err == nil {
			t.Errorf("ParsePeerIP(%q) accepted", in)
		}
	}
}
