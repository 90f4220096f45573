package k8s

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/calico-aio/calico-aio/store/selector"
)

func TestNamespaceToProfile(t *testing.T) {
	ns := decodeYAML[Namespace](t, `
apiVersion: v1
kind: Namespace
metadata:
  name: shop
  uid: 9d1e
  labels: {team: blue, kubernetes.io/metadata.name: shop, empty: ""}`)
	p := NamespaceToProfile(ns)
	assertJSON(t, p, `
kind: Profile
apiVersion: projectcalico.org/v3
metadata: {name: kns.shop}
spec:
  ingress: [{action: Allow, source: {}, destination: {}}]
  egress: [{action: Allow, source: {}, destination: {}}]
  labelsToApply:
    pcns.team: blue
    pcns.kubernetes.io/metadata.name: shop
    pcns.empty: ""
    pcns.projectcalico.org/name: shop`)
	assertValid(t, p)

	// Without labels the profile still carries the namespace's name.
	p = NamespaceToProfile(Namespace{Metadata: ObjectMeta{Name: "default"}})
	if want := map[string]string{"pcns.projectcalico.org/name": "default"}; !maps.Equal(p.Spec.LabelsToApply, want) {
		t.Errorf("labelsToApply = %v, want %v", p.Spec.LabelsToApply, want)
	}
	assertValid(t, p)
}

// TestNamespaceSelectorOnProfile reads the profile's labels the way the
// calculation does (pcns. labels without the prefix) and checks converted
// namespaceSelectors against them.
func TestNamespaceSelectorOnProfile(t *testing.T) {
	p := NamespaceToProfile(Namespace{Metadata: ObjectMeta{Name: "prod", Labels: map[string]string{"env": "prod"}}})
	nsLabels := map[string]string{}
	for k, v := range p.Spec.LabelsToApply {
		if name, ok := strings.CutPrefix(k, NamespaceLabelPrefix); ok {
			nsLabels[name] = v
		}
	}
	for _, tc := range []struct {
		sel  *LabelSelector
		want bool
	}{
		{&LabelSelector{}, true},
		{&LabelSelector{MatchLabels: map[string]string{"env": "prod"}}, true},
		{&LabelSelector{MatchLabels: map[string]string{"env": "dev"}}, false},
		{&LabelSelector{MatchLabels: map[string]string{NameLabel: "prod"}}, true},
		{&LabelSelector{MatchExpressions: []LabelSelectorRequirement{{Key: "env", Operator: OpNotIn, Values: []string{"prod"}}}}, false},
	} {
		text, err := LabelSelectorToCalico(tc.sel)
		if err != nil {
			t.Fatal(err)
		}
		if got := selector.MustParse(text).Evaluate(nsLabels); got != tc.want {
			t.Errorf("%q on %v = %v, want %v", text, nsLabels, got, tc.want)
		}
	}
}

func TestServiceAccountToProfile(t *testing.T) {
	sa := decodeYAML[ServiceAccount](t, `{metadata: {name: builder, namespace: ci, labels: {role: build}}}`)
	p := ServiceAccountToProfile(sa)
	assertJSON(t, p, `
kind: Profile
apiVersion: projectcalico.org/v3
metadata: {name: ksa.ci.builder}
spec:
  labelsToApply: {pcsa.role: build, pcsa.projectcalico.org/name: builder}`)
	assertValid(t, p)

	if got := ServiceAccountToProfile(ServiceAccount{Metadata: ObjectMeta{Name: "x"}}).Metadata.Name; got != "ksa.default.x" {
		t.Errorf("profile of a service account without namespace = %q, want ksa.default.x", got)
	}

	// A name longer than a label value still gets a valid profile, without
	// the name label; so does a label whose prefixed key is too long.
	long := strings.Repeat("a", 64)
	longPrefix := strings.Repeat("p", 250) + ".io/k"
	p = ServiceAccountToProfile(ServiceAccount{Metadata: ObjectMeta{Name: long, Namespace: "ci",
		Labels: map[string]string{"ok": "1", longPrefix: "v"}}})
	if want := map[string]string{"pcsa.ok": "1"}; !maps.Equal(p.Spec.LabelsToApply, want) {
		t.Errorf("labelsToApply = %v, want %v", p.Spec.LabelsToApply, want)
	}
	assertValid(t, p)
}

func TestPodLabelsAndProfiles(t *testing.T) {
	pod := decodeYAML[Pod](t, `
metadata:
  name: web-1
  namespace: shop
  labels: {app: web, projectcalico.org/namespace: spoofed, projectcalico.org/serviceaccount: admin}
spec: {serviceAccountName: web-sa, nodeName: node-1}`)
	orig := maps.Clone(pod.Metadata.Labels)
	assertJSON(t, PodLabels(pod), `{app: web, projectcalico.org/namespace: shop,
	  projectcalico.org/orchestrator: k8s, projectcalico.org/serviceaccount: web-sa}`)
	if !maps.Equal(pod.Metadata.Labels, orig) {
		t.Errorf("PodLabels modified the pod's labels: %v", pod.Metadata.Labels)
	}
	if got, want := PodProfiles(pod), []string{"kns.shop", "ksa.shop.web-sa"}; !slices.Equal(got, want) {
		t.Errorf("PodProfiles = %v, want %v", got, want)
	}

	// No (or an over-long) service account: no label, even a spoofed one.
	for _, sa := range []string{"", strings.Repeat("s", 64)} {
		pod.Spec.ServiceAccountName = sa
		if v, ok := PodLabels(pod)["projectcalico.org/serviceaccount"]; ok {
			t.Errorf("service account %q: label = %q, want none", sa, v)
		}
	}
	pod.Spec.ServiceAccountName = ""
	if got, want := PodProfiles(pod), []string{"kns.shop"}; !slices.Equal(got, want) {
		t.Errorf("PodProfiles without service account = %v, want %v", got, want)
	}
	if got := PodLabels(Pod{Metadata: ObjectMeta{Namespace: "n"}}); len(got) != 2 {
		t.Errorf("labels of a bare pod = %v, want namespace and orchestrator", got)
	}
}

// TestPolicySelectsPods: a converted policy selects pods by PodLabels and
// never a non-Kubernetes workload with the same labels.
func TestPolicySelectsPods(t *testing.T) {
	np := decodeYAML[NetworkPolicy](t, `{metadata: {name: p, namespace: shop}, spec: {podSelector: {matchLabels: {app: web}}}}`)
	p, err := NetworkPolicyToCalico(np)
	if err != nil {
		t.Fatal(err)
	}
	sel := selector.MustParse(p.Spec.Selector)
	web := Pod{Metadata: ObjectMeta{Namespace: "shop", Labels: map[string]string{"app": "web"}}}
	db := Pod{Metadata: ObjectMeta{Namespace: "shop", Labels: map[string]string{"app": "db"}}}
	if !sel.Evaluate(PodLabels(web)) || sel.Evaluate(PodLabels(db)) {
		t.Errorf("%q: web pod %v, db pod %v; want true, false", p.Spec.Selector, sel.Evaluate(PodLabels(web)), sel.Evaluate(PodLabels(db)))
	}
	cniWorkload := map[string]string{"app": "web", "projectcalico.org/orchestrator": "cni"}
	if sel.Evaluate(cniWorkload) {
		t.Errorf("%q selects a plain CNI workload", p.Spec.Selector)
	}
}

func TestPodPorts(t *testing.T) {
	pod := decodeYAML[Pod](t, `
spec:
  initContainers: [{name: sidecar, ports: [{name: metrics, containerPort: 9100}]}]
  containers:
  - name: app
    ports:
    - {name: http, containerPort: 8080}
    - {name: dns, containerPort: 53, protocol: UDP}
    - {containerPort: 9000}
    - {containerPort: 9443, hostPort: 443, hostIP: 10.0.0.1}
    - {name: weird, containerPort: 7, protocol: ICMP}
    - {name: zero, containerPort: 0}
  - name: db
    ports: [{name: sql, containerPort: 5432, protocol: SCTP}]`)
	assertJSON(t, PodPorts(pod), `[
	  {name: http, protocol: TCP, port: 8080, hostPort: 0, hostIP: ""},
	  {name: dns, protocol: UDP, port: 53, hostPort: 0, hostIP: ""},
	  {name: "", protocol: TCP, port: 9443, hostPort: 443, hostIP: 10.0.0.1},
	  {name: sql, protocol: SCTP, port: 5432, hostPort: 0, hostIP: ""},
	  {name: metrics, protocol: TCP, port: 9100, hostPort: 0, hostIP: ""}]`)
}

func TestPodIPs(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status PodStatus
		host   bool
		want   []string
	}{
		{name: "none", want: nil},
		{name: "dual stack", status: PodStatus{PodIP: "10.65.0.4", PodIPs: []PodIP{{"10.65.0.4"}, {"fd00::0004"}}},
			want: []string{"10.65.0.4", "fd00::4"}},
		{name: "only podIP", status: PodStatus{PodIP: "10.65.0.9"}, want: []string{"10.65.0.9"}},
		{name: "podIPs win over podIP", status: PodStatus{PodIP: "10.0.0.1", PodIPs: []PodIP{{"10.0.0.2"}}}, want: []string{"10.0.0.2"}},
		{name: "bad and duplicate entries dropped", status: PodStatus{PodIPs: []PodIP{{"bogus"}, {"10.0.0.2"}, {"::ffff:10.0.0.2"}, {""}}},
			want: []string{"10.0.0.2"}},
		{name: "host network", host: true, status: PodStatus{PodIP: "192.168.1.5"}, want: nil},
	} {
		pod := Pod{Spec: PodSpec{HostNetwork: tc.host}, Status: tc.status}
		if got := PodIPs(pod); !slices.Equal(got, tc.want) {
			t.Errorf("%s: PodIPs = %q, want %q", tc.name, got, tc.want)
		}
	}
}
