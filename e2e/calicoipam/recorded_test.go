package calicoipam_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"net/netip"
	"os"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/calico-aio/calico-aio/e2e/calicoipam"
	"github.com/calico-aio/calico-aio/e2e/kubeapi"
)

// operation is one recorded CNI call of testdata/api-calls.json.
type operation struct {
	Operation string
	Stdout    json.RawMessage
	Calls     []call
}

func loadOperations(t *testing.T) []operation {
	t.Helper()
	b, err := os.ReadFile("testdata/api-calls.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct{ Operations []operation }
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	for i, op := range doc.Operations {
		for j, c := range op.Calls {
			path, query, _ := strings.Cut(c.Path, "?")
			doc.Operations[i].Calls[j].Path = canonicalPath(path, query)
		}
	}
	return doc.Operations
}

// containerIDs are the pods' containers, from the handles in the calls.
func containerIDs(ops []operation) map[string]string {
	ids := map[string]string{}
	for _, op := range ops {
		_, pod, _ := strings.Cut(op.Operation, "shop/")
		pod, _, _ = strings.Cut(pod, " ")
		for _, c := range op.Calls {
			if _, id, ok := strings.Cut(c.Path, "/ipamhandles/k8s-pod-network."); ok && pod != "" {
				ids[pod] = id
			}
		}
	}
	return ids
}

// step is what the test does for one recorded CNI call.
type step struct {
	op     int                               // index in api-calls.json
	pod    string                            // shop/<pod>
	add    bool                              // ADD, else DEL
	before func(*testing.T, *kubeapi.Server) // set-up outside the recording
	state  string                            // objects.json step whose IPAM state must hold after it
}

// TestRecordedCNICalls replays the recorded CNI calls on node1 with the
// double, against a real kube-apiserver with our CRDs: each call's request
// sequence (verb and path, query order aside) is the recorded one, its
// write bodies are the recorded ones field for field, its answer is the
// recorded one, and after it the IPAM objects and pod annotations as
// stored equal the recorded versions (uids, resourceVersions, timestamps
// and the sequence number's clock start aside).
func TestRecordedCNICalls(t *testing.T) {
	kapi := startAPIServer(t)
	objects := loadObjects(t)
	seed(t, kapi, objects)
	ops := loadOperations(t)
	rec := &recorder{}
	d := newDouble(kapi, rec, calicoipam.WithStartBlock(netip.MustParsePrefix("10.244.166.128/26")))

	steps := []step{
		{op: 0, pod: "web-1", add: true, state: "3b"},
		{op: 1, pod: "web-2", add: true, state: "3c"},
		{op: 2, pod: "web-2"},
		{op: 3, pod: "web-2", state: "3d"},
		{op: 4, pod: "web-3", add: true, before: deleteClusterInformation},
		{op: 5, pod: "web-3", add: true, before: clusterInformationReady(false)},
		{op: 6, pod: "web-3"},
		{op: 7, pod: "web-3", add: true, before: clusterInformationReady(true), state: "3e"},
		{op: 8, pod: "web-1"},
		{op: 9, pod: "web-3", state: "3f"},
	}
	ids := containerIDs(ops)
	for _, s := range steps {
		op := ops[s.op]
		if !strings.Contains(op.Operation, "shop/"+s.pod) {
			t.Fatalf("step %d: recorded operation %q is not about shop/%s", s.op, op.Operation, s.pod)
		}
		t.Run(fmt.Sprintf("%d-%s", s.op, op.Operation), func(t *testing.T) {
			if s.before != nil {
				s.before(t, kapi)
			}
			rec.take()
			p := calicoipam.Pod{Node: "node1", Namespace: "shop", Name: s.pod, ContainerID: ids[s.pod]}
			got := runStep(t, d, p, s.add)
			checkAnswer(t, op, got)
			calls := rec.take()
			checkCalls(t, op.Calls, calls)
			checkBodies(t, op.Calls, calls)
			if s.state != "" {
				checkStoredState(t, kapi, objects, s.state)
			}
		})
	}
}

// answer is what a CNI call returned: an address or an error.
type answer struct {
	addr netip.Addr
	err  error
}

func runStep(t *testing.T, d *calicoipam.Double, p calicoipam.Pod, add bool) answer {
	t.Helper()
	if add {
		a, err := d.Assign(context.Background(), p)
		return answer{a, err}
	}
	return answer{err: d.Release(context.Background(), p)}
}

// checkAnswer compares with what the CNI plugin printed: the address of an
// ADD, the message of a refusal, nothing for a DEL.
func checkAnswer(t *testing.T, op operation, got answer) {
	t.Helper()
	var out struct {
		Msg string
		IPs []struct{ Address string }
	}
	if len(op.Stdout) > 0 && string(op.Stdout) != `""` {
		if err := json.Unmarshal(op.Stdout, &out); err != nil {
			t.Fatal(err)
		}
	}
	switch {
	case out.Msg != "":
		if got.err == nil || got.err.Error() != out.Msg {
			t.Errorf("refusal: got %v, want %q", got.err, out.Msg)
		}
	case got.err != nil:
		t.Errorf("unexpected error: %v", got.err)
	case len(out.IPs) > 0:
		if want := out.IPs[0].Address; netip.PrefixFrom(got.addr, 32).String() != want {
			t.Errorf("address %v, want %s", got.addr, want)
		}
	}
}

// callLines are the calls as "verb path code".
func callLines(calls []call) []string {
	out := make([]string, len(calls))
	for i, c := range calls {
		out[i] = fmt.Sprintf("%s %d", c, c.Code)
	}
	return out
}

// checkCalls compares verb, path and status code of each request.
func checkCalls(t *testing.T, want, got []call) {
	t.Helper()
	if w, g := callLines(want), callLines(got); !slices.Equal(w, g) {
		t.Errorf("requests differ from the recording:\n got:\n  %s\nwant:\n  %s", strings.Join(g, "\n  "), strings.Join(w, "\n  "))
	}
}

// checkBodies compares each write body with the recorded one, normalised.
func checkBodies(t *testing.T, want, got []call) {
	t.Helper()
	for i := range min(len(want), len(got)) {
		if len(want[i].Body) == 0 && len(got[i].Body) == 0 {
			continue
		}
		if len(want[i].Body) == 0 || len(got[i].Body) == 0 {
			t.Errorf("%s: body %s, recorded %s", got[i], got[i].Body, want[i].Body)
			continue
		}
		w, g := normalise(decodeExact(t, want[i].Body)), normalise(decodeExact(t, got[i].Body))
		if !reflect.DeepEqual(w, g) {
			t.Errorf("%s body differs:\n got %s\nwant %s", got[i], jsonText(g), jsonText(w))
		}
	}
}

// checkStoredState compares the stored IPAM objects and the pods'
// annotations with the recorded versions at step (all keys of those kinds:
// a key not there yet, or deleted, must be absent).
func checkStoredState(t *testing.T, kapi *kubeapi.Server, objects map[string][]recordedVersion, step string) {
	t.Helper()
	for _, key := range sortedKeys(objects) {
		path, ok := storedPath(key)
		if !ok {
			continue
		}
		var last *recordedVersion
		for i, v := range objects[key] {
			if v.Step[:2] <= step {
				last = &objects[key][i]
			}
		}
		code, body := kapi.Do(t, http.MethodGet, path, nil)
		if last == nil || last.Deleted {
			if code != http.StatusNotFound && !strings.HasPrefix(key, "Pod/") {
				t.Errorf("after %s: %s is there (%d), recorded absent", step, key, code)
			}
			continue
		}
		if code != http.StatusOK {
			t.Errorf("after %s: GET %s: %d %s", step, key, code, body)
			continue
		}
		want, got := decodeExact(t, last.Object), decodeExact(t, body)
		if strings.HasPrefix(key, "Pod/") {
			want, got = obj{"annotations": want["metadata"].(obj)["annotations"]}, obj{"annotations": got["metadata"].(obj)["annotations"]}
		}
		if w, g := normalise(want), normalise(got); !reflect.DeepEqual(w, g) {
			t.Errorf("after %s: %s as stored differs:\n got %s\nwant %s", step, key, jsonText(g), jsonText(w))
		}
	}
}

// storedPath is where the object of an objects.json key lives, for the
// kinds the double writes.
func storedPath(key string) (string, bool) {
	kind, name, _ := strings.Cut(key, "/")
	plural := map[string]string{"IPAMBlock": "ipamblocks", "BlockAffinity": "blockaffinities",
		"IPAMHandle": "ipamhandles", "IPAMConfig": "ipamconfigs"}[kind]
	switch {
	case plural != "":
		return "/apis/crd.projectcalico.org/v1/" + plural + "/" + name, true
	case kind == "Pod":
		ns, pod, _ := strings.Cut(name, "/")
		return "/api/v1/namespaces/" + ns + "/pods/" + pod, true
	}
	return "", false
}

// normalise replaces what differs from run to run by its kind: uids and
// resourceVersions by "<set>", timestamps by "<time>", and the block's
// sequence numbers by their offset from the block's clock start (the
// smallest of them).
func normalise(o obj) obj {
	if meta, ok := o["metadata"].(obj); ok {
		for _, k := range []string{"uid", "resourceVersion"} {
			if _, ok := meta[k]; ok {
				meta[k] = "<set>"
			}
		}
		if meta["creationTimestamp"] != nil {
			meta["creationTimestamp"] = "<time>"
		}
		delete(meta, "managedFields")
	}
	if o["kind"] == "DeleteOptions" {
		delete(o, "apiVersion") // the audit log shows the internal version
		if pre, ok := o["preconditions"].(obj); ok && pre["uid"] != nil {
			pre["uid"] = "<set>"
		}
	}
	spec, ok := o["spec"].(obj)
	if !ok {
		return o
	}
	if spec["affinityClaimTime"] != nil {
		spec["affinityClaimTime"] = "<time>"
	}
	if attrs, ok := spec["attributes"].([]any); ok {
		for _, a := range attrs {
			if sec, ok := a.(obj)["secondary"].(obj); ok && sec["timestamp"] != nil {
				sec["timestamp"] = "<time>"
			}
		}
	}
	normaliseSequence(spec)
	return o
}

func normaliseSequence(spec obj) {
	seq, ok := spec["sequenceNumber"].(json.Number)
	if !ok {
		return
	}
	nums := map[string]*big.Int{"": toInt(seq)}
	perOrdinal, _ := spec["sequenceNumberForAllocation"].(obj)
	for k, v := range perOrdinal {
		nums[k] = toInt(v.(json.Number))
	}
	base := nums[""]
	for _, n := range nums {
		if n.Cmp(base) < 0 {
			base = n
		}
	}
	rel := func(n *big.Int) json.Number { return json.Number(new(big.Int).Sub(n, base).String()) }
	spec["sequenceNumber"] = rel(nums[""])
	for k := range perOrdinal {
		perOrdinal[k] = rel(nums[k])
	}
}

func toInt(n json.Number) *big.Int {
	i, ok := new(big.Int).SetString(n.String(), 10)
	if !ok {
		return big.NewInt(-1)
	}
	return i
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// deleteClusterInformation removes ClusterInformation default (the CNI
// plugin then refuses).
func deleteClusterInformation(t *testing.T, kapi *kubeapi.Server) {
	t.Helper()
	mustDo(t, kapi, http.MethodDelete, "/apis/crd.projectcalico.org/v1/clusterinformations/default", nil, http.StatusOK)
}

// clusterInformationReady writes ClusterInformation default with
// datastoreReady set to ready, creating it when it is missing.
func clusterInformationReady(ready bool) func(*testing.T, *kubeapi.Server) {
	return func(t *testing.T, kapi *kubeapi.Server) {
		t.Helper()
		path := "/apis/crd.projectcalico.org/v1/clusterinformations/default"
		code, body := kapi.Do(t, http.MethodGet, path, nil)
		if code == http.StatusNotFound {
			ci := obj{"apiVersion": "crd.projectcalico.org/v1", "kind": "ClusterInformation", "metadata": obj{"name": "default"},
				"spec": obj{"clusterGUID": "87db7460a8634769b3ecb77ff2c89371", "clusterType": "kdd", "datastoreReady": ready}}
			mustDo(t, kapi, http.MethodPost, "/apis/crd.projectcalico.org/v1/clusterinformations", ci, http.StatusCreated)
			return
		}
		ci := decodeExact(t, body)
		ci["spec"].(obj)["datastoreReady"] = ready
		mustDo(t, kapi, http.MethodPut, path, ci, http.StatusOK)
	}
}
