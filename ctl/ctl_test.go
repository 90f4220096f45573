package ctl_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/calico-aio/calico-aio/ctl"
	"github.com/calico-aio/calico-aio/store"
	"github.com/calico-aio/calico-aio/store/api"
	"github.com/calico-aio/calico-aio/store/etcdv3"
	"github.com/calico-aio/calico-aio/store/storetest"
)

type harness struct {
	t   *testing.T
	ep  string
	cli *store.Client
}

func newHarness(t *testing.T) *harness {
	e := storetest.StartEtcd(t)
	return &harness{t: t, ep: e.Endpoints()[0], cli: e.Client(t)}
}

// run executes calicoctl in-process against the test etcd.
func (h *harness) run(stdin string, args ...string) (string, string, int) {
	h.t.Helper()
	var out, errb bytes.Buffer
	full := append([]string{}, args...)
	full = append(full, "--etcd-endpoints", h.ep, "--config", "")
	code := ctl.Main(full, ctl.IO{Stdin: strings.NewReader(stdin), Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }})
	return out.String(), errb.String(), code
}

func (h *harness) mustRun(stdin string, args ...string) string {
	h.t.Helper()
	out, errs, code := h.run(stdin, args...)
	if code != 0 {
		h.t.Fatalf("calicoctl %v: exit %d\nstdout: %s\nstderr: %s", args, code, out, errs)
	}
	return out
}

// resourceKeys lists every key under the v3 resource prefix.
func (h *harness) resourceKeys() []string {
	kvs, _, err := storetest.Raw(h.t, h.cli).ListPrefix(context.Background(), etcdv3.ResourcePrefix)
	if err != nil {
		h.t.Fatal(err)
	}
	var keys []string
	for _, kv := range kvs {
		keys = append(keys, kv.Key)
	}
	return keys
}

func readFixture(t *testing.T) string {
	b, err := os.ReadFile("testdata/all-kinds.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestApplyGetDeleteEveryKind(t *testing.T) {
	h := newHarness(t)
	fixture := readFixture(t)
	out := h.mustRun("", "apply", "-f", "testdata/all-kinds.yaml")
	if !strings.Contains(out, "Successfully applied 14 resource(s)") {
		t.Errorf("apply output = %q", out)
	}
	// Applying the same file again updates in place.
	h.mustRun(fixture, "apply", "-f", "-")

	// Every object is stored under Calico's key with Calico's value shape.
	want := map[string]string{
		"/calico/resources/v3/projectcalico.org/ippools/pool-a":                                    "IPPool",
		"/calico/resources/v3/projectcalico.org/ippools/pool-v6":                                   "IPPool",
		"/calico/resources/v3/projectcalico.org/nodes/node-1":                                      "Node",
		"/calico/resources/v3/projectcalico.org/workloadendpoints/default/node--1-cni-abc123-eth0": "WorkloadEndpoint",
		"/calico/resources/v3/projectcalico.org/stagednetworkpolicies/default/staged-deny":         "StagedNetworkPolicy",
		"/calico/resources/v3/projectcalico.org/profiles/net1":                                     "Profile",
		"/calico/resources/v3/projectcalico.org/networkpolicies/default/allow-web":                 "NetworkPolicy",
		"/calico/resources/v3/projectcalico.org/globalnetworkpolicies/deny-smtp":                   "GlobalNetworkPolicy",
		"/calico/resources/v3/projectcalico.org/networksets/default/partners":                      "NetworkSet",
		"/calico/resources/v3/projectcalico.org/globalnetworksets/blocked":                         "GlobalNetworkSet",
		"/calico/resources/v3/projectcalico.org/bgppeers/rr-1":                                     "BGPPeer",
		"/calico/resources/v3/projectcalico.org/bgpconfigurations/default":                         "BGPConfiguration",
		"/calico/resources/v3/projectcalico.org/felixconfigurations/default":                       "FelixConfiguration",
		"/calico/resources/v3/projectcalico.org/tiers/security":                                    "Tier",
		"/calico/resources/v3/projectcalico.org/clusterinformations/default":                       "ClusterInformation",
		// Created before the first write, as Calico's calicoctl does.
		"/calico/resources/v3/projectcalico.org/tiers/default":       "Tier",
		"/calico/resources/v3/projectcalico.org/tiers/kube-admin":    "Tier",
		"/calico/resources/v3/projectcalico.org/tiers/kube-baseline": "Tier",
	}
	for key, kind := range want {
		kv, err := storetest.Raw(t, h.cli).GetKey(context.Background(), key)
		if err != nil {
			t.Errorf("%s: %v", key, err)
			continue
		}
		var v map[string]any
		if err := json.Unmarshal(kv.Value, &v); err != nil {
			t.Fatal(err)
		}
		meta, _ := v["metadata"].(map[string]any)
		if v["kind"] != kind || v["apiVersion"] != "projectcalico.org/v3" || meta == nil || v["spec"] == nil {
			t.Errorf("%s: value %s lacks kind/apiVersion/metadata/spec", key, kv.Value)
		}
		if _, has := meta["resourceVersion"]; has {
			t.Errorf("%s: stored value carries resourceVersion", key)
		}
		if meta["uid"] == "" || meta["creationTimestamp"] == "" {
			t.Errorf("%s: no uid/creationTimestamp in %s", key, kv.Value)
		}
	}
	if got := len(h.resourceKeys()); got != len(want) {
		t.Errorf("stored %d resources, want %d: %v", got, len(want), h.resourceKeys())
	}

	// get by every kind, as yaml, decodes back to the same kind.
	for _, k := range api.Kinds() {
		out := h.mustRun("", "get", k.Plural, "-A", "-o", "json")
		var list struct {
			Kind  string            `json:"kind"`
			Items []json.RawMessage `json:"items"`
		}
		if err := json.Unmarshal([]byte(out), &list); err != nil {
			t.Fatalf("get %s -o json: %v\n%s", k.Plural, err, out)
		}
		if list.Kind != k.Kind+"List" {
			t.Errorf("get %s: list kind %q", k.Plural, list.Kind)
		}
		for _, it := range list.Items {
			if _, err := api.Decode(it); err != nil {
				t.Errorf("get %s: item does not decode: %v", k.Plural, err)
			}
		}
	}
	y := h.mustRun("", "get", "ippool", "pool-a", "-o", "yaml")
	for _, s := range []string{"kind: IPPool", "cidr: 10.65.0.0/16", "blockSize: 26", "nodeSelector: all()", "resourceVersion:"} {
		if !strings.Contains(y, s) {
			t.Errorf("get ippool pool-a -o yaml lacks %q:\n%s", s, y)
		}
	}

	// Deleting node-1 also deletes its workload endpoint (as calicoctl's
	// node delete does, node_delete.go), so the endpoint later in the file
	// is gone by then.
	out = h.mustRun(fixture, "delete", "--skip-not-exists", "-f", "-")
	if !strings.Contains(out, "Successfully deleted 14 resource(s)") {
		t.Errorf("delete output = %q", out)
	}
	if keys := h.resourceKeys(); len(keys) != 4 {
		t.Errorf("after delete: %v, want only clusterinformations/default and the default tiers", keys)
	}
	// Delete again: not found, unless --skip-not-exists.
	if _, errs, code := h.run(fixture, "delete", "-f", "-"); code == 0 || !strings.Contains(errs, "resource does not exist") {
		t.Errorf("second delete: exit %d, stderr %q", code, errs)
	}
	h.mustRun(fixture, "delete", "--skip-not-exists", "-f", "-")
}

func TestCreateReplaceAndConflicts(t *testing.T) {
	h := newHarness(t)
	pool := "apiVersion: projectcalico.org/v3\nkind: IPPool\nmetadata: {name: p1}\nspec: {cidr: 10.1.0.0/16}\n"
	out := h.mustRun(pool, "create", "-f", "-")
	if strings.TrimSpace(out) != "Successfully created 1 'IPPool' resource(s)" {
		t.Errorf("create: %q", out)
	}
	_, errs, code := h.run(pool, "create", "-f", "-")
	if code == 0 || !strings.Contains(errs, "resource already exists: IPPool(p1)") {
		t.Errorf("create twice: exit %d, %q", code, errs)
	}
	h.mustRun(pool, "create", "--skip-exists", "-f", "-")

	// replace with a stale resourceVersion loses with a conflict.
	got := h.mustRun("", "get", "ippool", "p1", "-o", "json")
	var cur map[string]any
	if err := json.Unmarshal([]byte(got), &cur); err != nil {
		t.Fatal(err)
	}
	h.mustRun(strings.Replace(pool, "{cidr: 10.1.0.0/16}", "{cidr: 10.1.0.0/16, natOutgoing: true}", 1), "replace", "-f", "-")
	stale, _ := json.Marshal(cur)
	_, errs, code = h.run(string(stale), "replace", "-f", "-")
	if code == 0 || !strings.Contains(errs, "update conflict") {
		t.Errorf("stale replace: exit %d, %q", code, errs)
	}
	// replace of something missing fails.
	_, errs, code = h.run(strings.Replace(strings.Replace(pool, "p1", "p2", 1), "10.1.", "10.7.", 1), "replace", "-f", "-")
	if code == 0 || !strings.Contains(errs, "resource does not exist: IPPool(p2)") {
		t.Errorf("replace missing: exit %d, %q", code, errs)
	}
	// delete by kind and name, using an alias.
	h.mustRun("", "delete", "pool", "p1")
}

func TestBadInputWritesNothing(t *testing.T) {
	h := newHarness(t)
	good := "apiVersion: projectcalico.org/v3\nkind: IPPool\nmetadata: {name: ok}\nspec: {cidr: 10.2.0.0/16}\n"
	cases := []struct {
		name, input, want string
	}{
		{"broken yaml", "kind: IPPool\nmetadata: [name: x\n", "invalid YAML"},
		{"unknown kind", "apiVersion: projectcalico.org/v3\nkind: Frobnicator\nmetadata: {name: x}\n", `unknown kind "Frobnicator"`},
		{"bad cidr after a good doc", good + "---\napiVersion: projectcalico.org/v3\nkind: IPPool\nmetadata: {name: bad}\nspec: {cidr: 10.0.0.0/33}\n", `spec.cidr: "10.0.0.0/33"`},
		{"bad block size", "apiVersion: projectcalico.org/v3\nkind: IPPool\nmetadata: {name: b}\nspec: {cidr: 10.3.0.0/16, blockSize: 33}\n", "spec.blockSize"},
		{"overlapping pools in one file", good + "---\napiVersion: projectcalico.org/v3\nkind: IPPool\nmetadata: {name: other}\nspec: {cidr: 10.2.128.0/17}\n", "overlap"},
		{"bad name", "apiVersion: projectcalico.org/v3\nkind: Profile\nmetadata: {name: Bad_Name}\nspec: {}\n", "metadata.name"},
		{"bad selector", "apiVersion: projectcalico.org/v3\nkind: GlobalNetworkPolicy\nmetadata: {name: p}\nspec: {selector: 'a =='}\n", "selector"},
		{"bad port", "apiVersion: projectcalico.org/v3\nkind: GlobalNetworkPolicy\nmetadata: {name: p}\nspec:\n  ingress:\n  - action: Allow\n    protocol: TCP\n    destination: {ports: [70000]}\n", "ports"},
		{"wrong apiVersion", "apiVersion: v1\nkind: IPPool\nmetadata: {name: x}\n", "apiVersion"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, errs, code := h.run(tc.input, "apply", "-f", "-")
			if code == 0 {
				t.Fatalf("exit 0, want failure")
			}
			if !strings.Contains(errs, tc.want) {
				t.Errorf("stderr %q does not mention %q", errs, tc.want)
			}
			if keys := h.resourceKeys(); len(keys) != 0 {
				t.Errorf("wrote %v", keys)
			}
		})
	}
	// An existing pool blocks an overlapping new one.
	h.mustRun(good, "apply", "-f", "-")
	_, errs, code := h.run(strings.Replace(strings.Replace(good, "ok", "ok2", 1), "10.2.0.0/16", "10.2.3.0/24", 1), "create", "-f", "-")
	if code == 0 || !strings.Contains(errs, "overlap") {
		t.Errorf("overlapping create: exit %d, %q", code, errs)
	}
}

func TestUnreachableDatastore(t *testing.T) {
	var out, errb bytes.Buffer
	code := ctl.Main([]string{"get", "ippools", "--etcd-endpoints", "http://127.0.0.1:1", "--timeout", "500ms", "--config", ""},
		ctl.IO{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }})
	if code == 0 || !strings.Contains(errb.String(), "cannot reach the datastore") {
		t.Errorf("exit %d, stderr %q", code, errb.String())
	}
}

func TestTablesLookLikeCalico(t *testing.T) {
	h := newHarness(t)
	h.mustRun(readFixture(t), "apply", "-f", "-")
	got := h.mustRun("", "get", "ippool", "-o", "wide")
	want := "NAME      CIDR           NAT     IPIPMODE   VXLANMODE   DISABLED   DISABLEBGPEXPORT   SELECTOR   ASSIGNMENTMODE   \n" +
		"pool-a    10.65.0.0/16   true    Never      Never       false      false              all()      Automatic        \n" +
		"pool-v6   fd00:65::/48   false   Never      Never       false      false              all()      Automatic        \n\n"
	if got != want {
		t.Errorf("get ippool -o wide:\n%q\nwant\n%q", got, want)
	}
	got = h.mustRun("", "get", "nodes", "-o", "wide")
	want = "NAME     ASN       IPV4          IPV6   \nnode-1   (64513)   10.0.0.1/24          \n\n"
	if got != want {
		t.Errorf("get nodes -o wide:\n%q\nwant\n%q", got, want)
	}
	got = h.mustRun("", "get", "wep", "-A")
	if !strings.HasPrefix(got, "NAMESPACE   WORKLOAD   NODE     NETWORKS       INTERFACE    \n") {
		t.Errorf("get wep -A:\n%s", got)
	}
}

func TestGlobalFlagsBeforeCommand(t *testing.T) {
	h := newHarness(t)
	var out, errb bytes.Buffer
	code := ctl.Main([]string{"--etcd-endpoints", h.ep, "--config", "", "get", "ippools"},
		ctl.IO{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }})
	if code != 0 || !strings.HasPrefix(out.String(), "NAME") {
		t.Errorf("exit %d, out %q, err %q", code, out.String(), errb.String())
	}
}

// An unsupported field is refused naming it; host endpoints and
// doNotTrack policies are enforced, so accepted; staged policies are
// stored and listed, never enforced (issue #13).
func TestRefusedAndStagedKinds(t *testing.T) {
	h := newHarness(t)
	pool := "apiVersion: projectcalico.org/v3\nkind: IPPool\nmetadata:\n  name: vx\nspec:\n  cidr: 10.99.0.0/16\n  disableBGPExport: true\n"
	if _, out, code := h.run(pool, "create", "-f", "-"); code == 0 || !strings.Contains(out, "spec.disableBGPExport") || !strings.Contains(out, "not supported") {
		t.Errorf("IPPool create: exit %d, stderr %q; want a refusal naming spec.disableBGPExport", code, out)
	}
	h.mustRun("apiVersion: projectcalico.org/v3\nkind: HostEndpoint\nmetadata:\n  name: h1\nspec:\n  node: node-1\n  interfaceName: eth0\n", "create", "-f", "-")
	h.mustRun("apiVersion: projectcalico.org/v3\nkind: GlobalNetworkPolicy\nmetadata:\n  name: dnt\nspec:\n  doNotTrack: true\n  applyOnForward: true\n", "apply", "-f", "-")
	for _, doc := range []string{
		"apiVersion: projectcalico.org/v3\nkind: StagedGlobalNetworkPolicy\nmetadata:\n  name: sg\nspec:\n  selector: all()\n  doNotTrack: true\n  applyOnForward: true\n",
		"apiVersion: projectcalico.org/v3\nkind: StagedKubernetesNetworkPolicy\nmetadata:\n  name: sk\n  namespace: default\nspec:\n  podSelector: {}\n  policyTypes: [Ingress]\n",
	} {
		h.mustRun(doc, "create", "-f", "-")
	}
	if out := h.mustRun("", "get", "stagedglobalnetworkpolicies"); !strings.Contains(out, "sg") {
		t.Errorf("get stagedglobalnetworkpolicies = %q", out)
	}
	if out := h.mustRun("", "get", "sknp", "-n", "default", "-o", "yaml"); !strings.Contains(out, "stagedAction: Set") || !strings.Contains(out, "podSelector: {}") {
		t.Errorf("get sknp -o yaml = %q", out)
	}
	h.mustRun("", "delete", "stagedglobalnetworkpolicy", "sg")
	if _, out, code := h.run("", "get", "stagedglobalnetworkpolicy", "sg"); code == 0 || !strings.Contains(out, "does not exist") {
		t.Errorf("after delete: exit %d, stderr %q", code, out)
	}
}
