package ctl_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/calico-aio/calico-aio/ctl"
	"github.com/calico-aio/calico-aio/e2e/kubeapi"
	"github.com/calico-aio/calico-aio/ipam"
	"github.com/calico-aio/calico-aio/store"
	"github.com/calico-aio/calico-aio/store/api"
	"github.com/calico-aio/calico-aio/store/kube"
	"github.com/calico-aio/calico-aio/store/storetest"
)

// migrateState is a small etcd cluster's worth of Calico resources.
const migrateState = `apiVersion: projectcalico.org/v3
kind: IPPool
metadata: {name: pool-a}
spec: {cidr: 10.70.0.0/16, blockSize: 26, ipipMode: Always, natOutgoing: true}
---
apiVersion: projectcalico.org/v3
kind: Tier
metadata: {name: security}
spec: {order: 100}
---
apiVersion: projectcalico.org/v3
kind: GlobalNetworkPolicy
metadata: {name: security.deny-db}
spec:
  tier: security
  order: 10
  selector: role == 'db'
  types: [Ingress]
  ingress: [{action: Deny, source: {nets: [10.0.0.0/8]}}]
---
apiVersion: projectcalico.org/v3
kind: NetworkPolicy
metadata: {name: allow-web, namespace: prod}
spec:
  selector: app == 'web'
  ingress: [{action: Allow, protocol: TCP, destination: {ports: [80]}}]
---
apiVersion: projectcalico.org/v3
kind: GlobalNetworkSet
metadata: {name: blocked, labels: {kind: blocked}}
spec: {nets: [192.0.2.0/24]}
---
apiVersion: projectcalico.org/v3
kind: BGPConfiguration
metadata: {name: default}
spec: {asNumber: 64512, nodeToNodeMeshEnabled: false, logSeverityScreen: Info}
---
apiVersion: projectcalico.org/v3
kind: BGPPeer
metadata: {name: tor}
spec: {peerIP: 192.0.2.1, asNumber: 64513}
---
apiVersion: projectcalico.org/v3
kind: FelixConfiguration
metadata: {name: default}
spec: {logSeverityScreen: Info, reportingInterval: 0s}
---
apiVersion: projectcalico.org/v3
kind: Node
metadata: {name: node1}
spec: {bgp: {ipv4Address: 10.0.0.1/24}}
---
apiVersion: projectcalico.org/v3
kind: Node
metadata: {name: node2}
spec:
  bgp: {ipv4Address: 10.0.0.2/24}
  orchRefs: [{orchestrator: k8s, nodeName: worker-2}]
---
apiVersion: projectcalico.org/v3
kind: Node
metadata: {name: node3}
spec: {bgp: {ipv4Address: 10.0.0.3/24}}
---
apiVersion: projectcalico.org/v3
kind: Profile
metadata: {name: legacy}
spec: {}
`

// migratedKinds are the kinds compared object for object after import.
var migratedKinds = []string{"IPPool", "Tier", "GlobalNetworkPolicy", "NetworkPolicy", "GlobalNetworkSet",
	"BGPConfiguration", "BGPPeer", "FelixConfiguration", "ClusterInformation",
	store.KindIPAMConfig, store.KindIPAMHandle, store.KindIPAMBlock, store.KindBlockAffinity}

func TestDatastoreMigrateEtcdToKubernetes(t *testing.T) {
	h := newHarness(t)
	// What calico-node leaves in etcd, then the user's resources.
	if err := h.cli.EnsureClusterInformation(bg, "test"); err != nil {
		t.Fatal(err)
	}
	if err := h.cli.EnsureDefaultTiers(bg); err != nil {
		t.Fatal(err)
	}
	h.mustRun(migrateState, "apply", "-f", "-")
	h.mustRun("", "ipam", "configure", "--max-blocks-per-host=8")
	if objs, _, err := h.cli.List(bg, store.ListOptions{Kind: store.KindIPAMConfig}); err != nil || len(objs) != 1 {
		t.Fatalf("IPAMConfig in etcd: %v %v", objs, err)
	}
	al := ipam.New(h.cli)
	handles := []string{"k8s-pod-network.c1", "k8s-pod-network.c2", "k8s-pod-network.c3", "ipip-tunnel-addr-node1", "ipip-tunnel-addr-node2"}
	for i, hd := range handles {
		args := ipam.AutoAssignArgs{HandleID: hd, Node: []string{"node1", "node2"}[i%2]}
		if node, ok := strings.CutPrefix(hd, "ipip-tunnel-addr-"); ok {
			args.Node, args.Use, args.Attrs = node, api.IPPoolAllowedUseTunnel, map[string]string{ipam.AttrType: "ipipTunnelAddress"}
		}
		autoAssign(t, al, args)
	}

	// Export refuses an unlocked datastore; lock, export.
	if out, errs, code := h.run("", "datastore", "migrate", "export"); code == 0 || !strings.Contains(errs, "Datastore is not locked") {
		t.Fatalf("export of an unlocked datastore: exit %d\n%s%s", code, out, errs)
	}
	h.mustRun("", "datastore", "migrate", "lock")
	export, errs, code := h.run("", "datastore", "migrate", "export")
	if code != 0 || !strings.Contains(errs, `Profile "legacy" is not exported`) {
		t.Fatalf("export: exit %d, stderr %q", code, errs)
	}

	kc := startKubeCluster(t, "prod")
	for _, n := range []string{"node1", "worker-2"} {
		if code, body := kc.Do(t, http.MethodPost, "/api/v1/nodes", map[string]any{"apiVersion": "v1", "kind": "Node", "metadata": map[string]any{"name": n}}); code != http.StatusCreated {
			t.Fatalf("node %s: %d %s", n, code, body)
		}
	}
	kb, err := kube.New(kc.KubeconfigPath)
	if err != nil {
		t.Fatal(err)
	}
	kcli := store.NewClient(kb)
	t.Cleanup(func() { _ = kcli.Close() })
	var warn bytes.Buffer
	if err := ctl.MigrateImport(kcli, &warn, []byte(export)); err != nil {
		t.Fatalf("import: %v\nexport:\n%s", err, export)
	}
	if !strings.Contains(warn.String(), `Node "node3": no Kubernetes Node`) {
		t.Errorf("import warnings = %q, want node2's", warn.String())
	}
	if err := ctl.SetDatastoreReady(kcli, true); err != nil {
		t.Fatal(err)
	}

	// node2's Kubernetes name is worker-2 (its orchRef): its IPAM moves there.
	renamed := map[string]string{"node2": "worker-2"}
	for _, kind := range migratedKinds {
		if got, want := modelObjects(t, kcli, kind, nil), modelObjects(t, h.cli, kind, renamed); !reflect.DeepEqual(got, want) {
			t.Errorf("%s after import:\n got %v\nwant %v", kind, got, want)
		}
	}
	for name, addr := range map[string]string{"node1": "10.0.0.1/24", "worker-2": "10.0.0.2/24"} {
		n, err := kcli.GetResource(bg, mustKind(t, "Node"), "", name)
		if err != nil || n.(*api.Node).Spec.BGP == nil || n.(*api.Node).Spec.BGP.IPv4Address != addr {
			t.Errorf("node %s after import: %+v %v", name, n, err)
		}
	}
	// Every handle holds the same address; node2's tunnel handle is worker-2's.
	kal := ipam.New(kcli)
	for _, hd := range handles {
		if got, want := held(t, kal, strings.Replace(hd, "addr-node2", "addr-worker-2", 1)), held(t, al, hd); len(want) != 1 || !slices.Equal(got, want) {
			t.Errorf("handle %s holds %v after import, %v before", hd, got, want)
		}
	}
	if err := ctl.MigrateImport(kcli, &warn, []byte(export)); err == nil || !strings.Contains(err.Error(), "already has Calico data") {
		t.Errorf("second import: %v, want refused", err)
	}
}

func TestDatastoreMigrateImportRefusesUnlockedExport(t *testing.T) {
	h := newHarness(t)
	if err := h.cli.EnsureClusterInformation(bg, "test"); err != nil {
		t.Fatal(err)
	}
	h.mustRun(poolYAML("pool", "10.71.0.0/16"), "apply", "-f", "-")
	h.mustRun("", "ipam", "configure", "--strictaffinity=true")
	h.mustRun("", "datastore", "migrate", "lock")
	export := h.mustRun("", "datastore", "migrate", "export")
	h.mustRun("", "datastore", "migrate", "unlock")
	// Lock and unlock wrote datastoreReady; the export says false.
	ci, err := h.cli.GetResource(bg, mustKind(t, "ClusterInformation"), "", "default")
	if err != nil || ci.(*api.ClusterInformation).Spec.DatastoreReady == nil || !*ci.(*api.ClusterInformation).Spec.DatastoreReady {
		t.Fatalf("after unlock: %+v %v", ci, err)
	}
	unlocked := strings.Replace(export, `"datastoreReady": false`, `"datastoreReady": true`, 1)
	if unlocked == export {
		t.Fatalf("export has no datastoreReady false:\n%s", export)
	}
	// An etcd target is refused before anything else.
	if _, errs, code := h.run(export, "datastore", "migrate", "import", "-f", "-"); code != 1 || !strings.Contains(errs, "Invalid datastore type: etcdv3 to import to for datastore migration. Datastore type must be kubernetes") {
		t.Errorf("import into etcd: exit %d, %s", code, errs)
	}
	// Flags a verb does not honour, and verbs that do not exist, are refused.
	for _, args := range [][]string{{"export", "-f", "x"}, {"lock", "extra"}, {"bogus"}, {}} {
		if out, errs, code := h.run("", append([]string{"datastore", "migrate"}, args...)...); code == 0 {
			t.Errorf("datastore migrate %v: exit 0\n%s%s", args, out, errs)
		}
	}
	if out, _, code := h.run("", "datastore", "migrate", "--help"); code != 0 || !strings.Contains(out, "unlock  Unlock the datastore") {
		t.Errorf("datastore migrate --help: exit %d\n%s", code, out)
	}
	sections := strings.Split(export, "\n===\n")
	if len(sections) != 3 {
		t.Fatalf("export has %d sections:\n%s", len(sections), export)
	}
	for bad, want := range map[string]string{
		unlocked:                              "not of a locked datastore",
		strings.Join(sections[:2], "\n===\n"): "found 2 sections",
		sections[0] + "\n===\n" + sections[1] + "\n===\n{}\n":         "No IPAM resources specified in file",
		sections[0] + "\n===\n" + sections[1] + "\n===\n{\"x\": 1}\n": "unknown field",
	} {
		if err := ctl.MigrateImport(store.NewClient(nonEtcd{h.cli.Backend}), &bytes.Buffer{}, []byte(bad)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("import: %v, want %q, of\n%s", err, want, bad)
		}
	}
}

// nonEtcd hides the etcd backend from the import's datastore-type check.
type nonEtcd struct{ store.Backend }

// startKubeCluster is a real kube-apiserver with our CRDs and namespaces.
func startKubeCluster(t *testing.T, namespaces ...string) *kubeapi.Server {
	t.Helper()
	s := kubeapi.Start(t, storetest.StartEtcd(t).Endpoints()[0])
	s.InstallCRDs(t, "../build/k8s/crds.yaml")
	for _, ns := range namespaces {
		if code, body := s.Do(t, http.MethodPost, "/api/v1/namespaces",
			map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns}}); code != http.StatusCreated {
			t.Fatalf("namespace %s: %d %s", ns, code, body)
		}
	}
	return s
}

// crdDefaults are the values Calico's CRD schemas default (the apiserver
// writes them into every object it stores): an etcd object without the
// field means the same.
var crdDefaults = map[string]map[string]any{
	"BGPConfiguration":   {"serviceLoadBalancerAggregation": "Enabled"},
	"FelixConfiguration": {"nftablesMode": "Auto"},
}

// dropEmpty removes empty objects (a rule's "source: {}"), which a custom
// resource does not keep and which mean the same as none.
func dropEmpty(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if m, ok := e.(map[string]any); ok && len(m) == 0 {
				delete(x, k)
				continue
			}
			x[k] = dropEmpty(e)
		}
	case []any:
		for i, e := range x {
			x[i] = dropEmpty(e)
		}
	}
	return v
}

// modelObjects lists kind as key -> model value, without the fields the
// datastore sets itself (uid, resourceVersion, creationTimestamp), with the
// node names in renamed replaced.
func modelObjects(t *testing.T, c *store.Client, kind string, renamed map[string]string) map[store.Key]map[string]any {
	t.Helper()
	objs, _, err := c.List(bg, store.ListOptions{Kind: kind})
	if err != nil {
		t.Fatalf("list %s: %v", kind, err)
	}
	out := map[store.Key]map[string]any{}
	for _, o := range objs {
		for from, to := range renamed {
			o.Value = bytes.ReplaceAll(o.Value, []byte(`"`+from+`"`), []byte(`"`+to+`"`))
			o.Value = bytes.ReplaceAll(o.Value, []byte(`"host:`+from+`"`), []byte(`"host:`+to+`"`))
			o.Value = bytes.ReplaceAll(o.Value, []byte(`-tunnel-addr-`+from+`"`), []byte(`-tunnel-addr-`+to+`"`))
			o.Key.Name = strings.Replace(o.Key.Name, "-tunnel-addr-"+from, "-tunnel-addr-"+to, 1)
			if o.Key.Node == from {
				o.Key.Node = to
			}
		}
		var v map[string]any
		if err := json.Unmarshal(o.Value, &v); err != nil {
			t.Fatal(err)
		}
		if m, ok := v["metadata"].(map[string]any); ok {
			delete(m, "uid")
			delete(m, "resourceVersion")
			delete(m, "creationTimestamp")
		}
		if s, ok := v["spec"].(map[string]any); ok {
			if kind == "ClusterInformation" {
				delete(s, "datastoreReady") // locked in etcd, unlocked in Kubernetes
			}
			for f, d := range crdDefaults[kind] {
				if s[f] == d {
					delete(s, f)
				}
			}
		}
		out[o.Key] = dropEmpty(v).(map[string]any)
	}
	return out
}
