package derive_test

import (
	"bytes"
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/calico-aio/calico-aio/store/kdd/derive"
)

// recordedObject is one recorded version of an object (../testdata/objects.json).
func recordedObject(t *testing.T, key, step string) []byte {
	t.Helper()
	b, err := os.ReadFile("../testdata/objects.json")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Objects map[string][]struct {
			Step   string
			Object json.RawMessage
		}
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	for _, v := range f.Objects[key] {
		if v.Step == step {
			return v.Object
		}
	}
	t.Fatalf("%s@%s not recorded", key, step)
	return nil
}

func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	for _, p := range []struct {
		b []byte
		v *any
	}{{a, &x}, {b, &y}} {
		d := json.NewDecoder(bytes.NewReader(p.b))
		d.UseNumber()
		if err := d.Decode(p.v); err != nil {
			t.Fatalf("%v: %s", err, p.b)
		}
	}
	return reflect.DeepEqual(x, y)
}

func TestNames(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{derive.WorkloadEndpointName("node1", "web-1", "eth0"), "node1-k8s-web--1-eth0"},
		{derive.WorkloadEndpointName("node-a", "pa1", "eth0"), "node--a-k8s-pa1-eth0"},
		// recorded host veths (calicoctl get workloadendpoints -o wide)
		{derive.HostVethName("shop", "web-1"), "cali751425ce827"},
		{derive.HostVethName("shop", "web-2"), "calib8419a605df"},
		{derive.HostVethName("shop", "web-3"), "calie1a869ef930"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}

// TestRecordedPods: each recorded pod version derives the endpoint
// calicoctl showed for it (calicoctl-output.txt).
func TestRecordedPods(t *testing.T) {
	const labels = `"labels":{"app":"web","projectcalico.org/namespace":"shop","projectcalico.org/orchestrator":"k8s","projectcalico.org/serviceaccount":"web-sa"}`
	const common = `"node":"node1","orchestrator":"k8s","profiles":["kns.shop","ksa.shop.web-sa"],"serviceAccountName":"web-sa","endpoint":"eth0"`
	const port = `"ports":[{"hostIP":"","hostPort":0,"name":"http","port":80,"protocol":"TCP"}]`
	wep := func(pod, uid, iface, spec string) string {
		return `{"kind":"WorkloadEndpoint","apiVersion":"projectcalico.org/v3","metadata":{"name":"node1-k8s-` +
			strings.ReplaceAll(pod, "-", "--") + `-eth0","namespace":"shop","uid":"` + uid +
			`","creationTimestamp":"2026-11-27T16:45:47Z",` + labels + `},"spec":{"pod":"` + pod +
			`","interfaceName":"` + iface + `",` + common + spec + `}}`
	}
	const uid1, uid2 = "68ad6d68-c7e0-43f3-90ff-fe1d0bbd7192", "f6e8204f-f8c8-4065-b562-ccc8bc61b5e9"
	for _, c := range []struct{ key, step, want string }{
		{"Pod/shop/web-1", "3a-before-cni", wep("web-1", uid1, "cali751425ce827", ","+port)},
		{"Pod/shop/web-1", "3b-after-add-web-1", wep("web-1", uid1, "cali751425ce827",
			`,"containerID":"c4719afa76fa448b5eca99e6736885846501d17956f2fcb2de5c916d723f3a87","ipNetworks":["10.244.166.128/32"],`+port)},
		{"Pod/shop/web-2", "3c-after-add-web-2", wep("web-2", uid2, "calib8419a605df",
			`,"containerID":"612f7a0edd33d5c1a7f59b38db605f5f0f9bf63cb4ce753b9bad0ff3aa941412","ipNetworks":["10.244.166.129/32"]`)},
		{"Pod/shop/web-2", "3d-after-del-web-2", wep("web-2", uid2, "calib8419a605df",
			`,"containerID":"612f7a0edd33d5c1a7f59b38db605f5f0f9bf63cb4ce753b9bad0ff3aa941412"`)},
	} {
		r, ok, err := derive.PodToWorkloadEndpoint(recordedObject(t, c.key, c.step))
		if err != nil || !ok {
			t.Fatalf("%s@%s: %v %v", c.key, c.step, ok, err)
		}
		if !sameJSON(t, r.Model, []byte(c.want)) {
			t.Errorf("%s@%s:\n got %s\nwant %s", c.key, c.step, r.Model, c.want)
		}
	}
}

func TestPodsWithoutEndpoint(t *testing.T) {
	for _, pod := range []string{
		`{"metadata":{"name":"p","namespace":"n"},"spec":{}}`,
		`{"metadata":{"name":"p","namespace":"n"},"spec":{"nodeName":"node1","hostNetwork":true}}`,
	} {
		if _, ok, err := derive.PodToWorkloadEndpoint([]byte(pod)); ok || err != nil {
			t.Errorf("%s: ok %v, %v", pod, ok, err)
		}
	}
	r, ok, err := derive.PodToWorkloadEndpoint([]byte(`{"metadata":{"name":"p","namespace":"n"},"spec":{"nodeName":"node1"},"status":{"podIPs":[{"ip":"10.0.0.5"},{"ip":"fd00::5"}]}}`))
	if err != nil || !ok || !strings.Contains(string(r.Model), `"ipNetworks":["10.0.0.5/32","fd00::5/128"]`) {
		t.Errorf("status addresses: %s %v", r.Model, err)
	}
}

// TestPodNetworkAnnotations: floatingIPs, allowedSourcePrefixes and hwAddr
// derive as Calico's conversion derives them.
func TestPodNetworkAnnotations(t *testing.T) {
	pod := func(annotations, status string) []byte {
		return []byte(`{"metadata":{"name":"p","namespace":"n","annotations":{` + annotations +
			`}},"spec":{"nodeName":"node1"},"status":{"podIPs":[` + status + `]}}`)
	}
	const dual = `{"ip":"10.0.0.5"},{"ip":"fd00::5"}`
	for _, c := range []struct {
		name, annotations, status string
		want                      []string // substrings of the model
		absent                    []string
	}{
		{"floatingIPs by family, in order", `"cni.projectcalico.org/floatingIPs":"[\"fd00:99::1\", \"203.0.113.9\"]"`, dual,
			[]string{`"ipNATs":[{"internalIP":"fd00::5","externalIP":"fd00:99::1"},{"internalIP":"10.0.0.5","externalIP":"203.0.113.9"}]`}, nil},
		{"floatingIPs from the podIPs annotation", `"cni.projectcalico.org/podIPs":"10.0.0.7/32","cni.projectcalico.org/floatingIPs":"[\"203.0.113.9\"]"`, dual,
			[]string{`"ipNATs":[{"internalIP":"10.0.0.7","externalIP":"203.0.113.9"}]`}, nil},
		{"floatingIP of a family the pod lacks is left out", `"cni.projectcalico.org/floatingIPs":"[\"fd00:99::1\",\"203.0.113.9\"]"`, `{"ip":"10.0.0.5"}`,
			[]string{`"ipNATs":[{"internalIP":"10.0.0.5","externalIP":"203.0.113.9"}]`}, nil},
		{"no floatingIPs without addresses", `"cni.projectcalico.org/floatingIPs":"[\"203.0.113.9\"]"`, ``, nil, []string{"ipNATs"}},
		{"allowedSourcePrefixes masked", `"cni.projectcalico.org/allowedSourcePrefixes":"[\"192.168.7.9/24\",\"fd00:1::1/64\"]"`, dual,
			[]string{`"allowSpoofedSourcePrefixes":["192.168.7.0/24","fd00:1::/64"]`}, nil},
		{"empty allowedSourcePrefixes", `"cni.projectcalico.org/allowedSourcePrefixes":"[]"`, dual, nil, []string{"allowSpoofedSourcePrefixes"}},
		{"hwAddr is the interface's, not the endpoint's", `"cni.projectcalico.org/hwAddr":"c2:b0:57:49:47:f1"`, dual, nil, []string{"mac", "c2:b0"}},
	} {
		r, ok, err := derive.PodToWorkloadEndpoint(pod(c.annotations, c.status))
		if err != nil || !ok {
			t.Errorf("%s: %v %v", c.name, ok, err)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(string(r.Model), w) {
				t.Errorf("%s: %s lacks %s", c.name, r.Model, w)
			}
		}
		for _, a := range c.absent {
			if strings.Contains(string(r.Model), a) {
				t.Errorf("%s: %s has %s", c.name, r.Model, a)
			}
		}
	}
	for _, c := range []struct{ name, annotations, want string }{
		{"floatingIPs not JSON", `"cni.projectcalico.org/floatingIPs":"203.0.113.9"`, "cni.projectcalico.org/floatingIPs"},
		{"floatingIPs not addresses", `"cni.projectcalico.org/floatingIPs":"[\"a.b\"]"`, `"a.b" is not an IP address`},
		{"floatingIPs to a range", `"cni.projectcalico.org/podIPs":"10.0.0.0/24","cni.projectcalico.org/floatingIPs":"[\"203.0.113.9\"]"`, "10.0.0.0/24 is not a single address"},
		{"allowedSourcePrefixes bare address", `"cni.projectcalico.org/allowedSourcePrefixes":"[\"192.168.7.9\"]"`, `cni.projectcalico.org/allowedSourcePrefixes: "192.168.7.9" is not a CIDR`},
	} {
		_, _, err := derive.PodToWorkloadEndpoint(pod(c.annotations, dual))
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "pod n/p") {
			t.Errorf("%s: %v, want an error saying %q", c.name, err, c.want)
		}
	}
}
