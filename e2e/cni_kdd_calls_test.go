package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/calico-aio/calico-aio/e2e/kubeapi"
)

// callsAuditPolicy records every request once, when it completes.
const callsAuditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived", "ResponseStarted"]
rules:
- level: Metadata
`

// apiCall is one audited request: verb and path (query left out).
type apiCall struct{ Verb, Path string }

func (c apiCall) String() string { return c.Verb + " " + c.Path }

// auditLog reads the calls of an apiserver's audit log from line from on.
type auditLog struct {
	path string
	seen int // lines already taken
}

// take returns the calls logged since the last take, less the
// apiserver's own.
func (a *auditLog) take(t testing.TB) []apiCall {
	t.Helper()
	f, err := os.Open(a.path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []apiCall
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	n := 0
	for sc.Scan() {
		if n++; n <= a.seen {
			continue
		}
		var ev struct {
			Verb, RequestURI string
			User             struct{ Username string }
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("audit log: %v", err)
		}
		if ev.User.Username == "system:apiserver" {
			continue // the apiserver's own requests (its identity lease), not the plugin's
		}
		u, err := url.Parse(ev.RequestURI)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, apiCall{ev.Verb, u.Path})
	}
	a.seen = n
	return out
}

// recordedCalls are the calls of a recorded operation (testdata/kdd/api-calls.json).
func recordedCalls(t testing.TB, operation string) []apiCall {
	t.Helper()
	b, err := os.ReadFile("testdata/kdd/api-calls.json")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Operations []struct {
			Operation string
			Calls     []struct{ Verb, Path string }
		}
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	for _, op := range f.Operations {
		if op.Operation == operation {
			var out []apiCall
			for _, c := range op.Calls {
				p, _, _ := strings.Cut(c.Path, "?")
				out = append(out, apiCall{c.Verb, p})
			}
			return out
		}
	}
	t.Fatalf("operation %q not recorded", operation)
	return nil
}

// ipamWrites are the writes among calls, as "verb resource" (names vary
// with the container and block).
func ipamWrites(calls []apiCall) []string {
	var out []string
	for _, c := range calls {
		if c.Verb == "get" || c.Verb == "list" || !strings.HasPrefix(c.Path, "/apis/crd.projectcalico.org/v1/") {
			continue
		}
		res := strings.Split(strings.TrimPrefix(c.Path, "/apis/crd.projectcalico.org/v1/"), "/")[0]
		out = append(out, c.Verb+" "+res)
	}
	return out
}

// TestCNIKDDCalls: on the Kubernetes datastore our plugin's requests for
// a first ADD on a node, a later ADD and a DEL follow real Calico's
// (testdata/kdd/api-calls.json): ClusterInformation read before any write; ADD ends with
// the pod status patch, DEL starts with the pod read and the patch; the
// IPAM writes are Calico's, in Calico's order; no Profile or other
// object is written. The IPAM writes, in order, are exactly Calico's: a
// first ADD on a node creates IPAMConfig default, writes the affinity
// pending, writes it pending again after finding no block, creates the
// block, confirms the affinity, creates the handle, then updates the block;
// a DEL updates the block, marks the handle deleted, then deletes it.
//
// What stays different, none of it a write: our ADD's first reads
// (ClusterInformation, the pod twice, its namespace, the IPAM's reads)
// go out at once rather than one after the other; our IPAM reads differ
// from Calico's (reads
// served from what it already read; no IPReservations list: the kind is
// refused by our calicoctl and our IPAM does not honour reservations,
// docs/DATASTORE.md); our DEL reads neither the node nor the pools after
// the release, and does not look for a handle of the pre-v3 form
// "<namespace>.<pod>" (only pods set up by Calico v2.x hold one).
func TestCNIKDDCalls(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	policy, audit := filepath.Join(dir, "audit-policy.yaml"), filepath.Join(dir, "audit.log")
	if err := os.WriteFile(policy, []byte(callsAuditPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	e := newKubeCNIEnvOn(t, 250, onKube, kubeapi.WithArgs("--audit-policy-file="+policy, "--audit-log-path="+audit))
	e.pool("default-ipv4-ippool", "10.244.0.0/16")
	e.create(t, "/api/v1/namespaces", map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "shop"}})
	e.create(t, "/api/v1/namespaces/shop/serviceaccounts", map[string]any{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": map[string]any{"name": "web-sa"}})
	for _, pod := range []string{"web-1", "web-2"} {
		e.createPodWith(t, "shop", pod, "web-sa", map[string]string{"app": "web"}, nil, []map[string]any{{"name": "http", "containerPort": 80}})
	}
	l := e.conflist(e.kubeconfig, "", `{"type":"calico-ipam"}`)
	log := &auditLog{path: audit}
	log.take(t)

	web1, web2 := podRuntime(t, "shop", "web-1"), podRuntime(t, "shop", "web-2")
	e.addOK(t, l, web1)
	checkADDCalls(t, log.take(t), recordedCalls(t, "Calico CNI ADD shop/web-1 (first on node1)"), "web-1")
	ip2 := e.addOK(t, l, web2)
	checkADDCalls(t, log.take(t), recordedCalls(t, "Calico CNI ADD shop/web-2"), "web-2")
	// The DEL of an older sandbox of web-2, after the newer one's ADD,
	// leaves the newer one's annotations and addresses alone.
	old := podRuntime(t, "shop", "web-2")
	old.ContainerID = "ctr-shop-web-2-old"
	if err := e.del(l, old); err != nil {
		t.Fatal(err)
	}
	for _, c := range log.take(t) {
		if c.Verb == "patch" {
			t.Errorf("DEL of an old sandbox patched the pod: %v", c)
		}
	}
	e.wantPodAddress(t, web2, "shop", "web-2", ip2)
	log.take(t) // the test's own reads
	if err := e.del(l, web2); err != nil {
		t.Fatal(err)
	}
	got, want := log.take(t), recordedCalls(t, "Calico CNI DEL shop/web-2")
	if len(got) < 3 || !slices.Equal(got[:3], want[:3]) {
		t.Errorf("DEL starts %v, want Calico's %v", got[:min(3, len(got))], want[:3])
	}
	checkIPAMWrites(t, "DEL", got, want)
	e.wantPodCleared(t, web2, "shop", "web-2")
}

// checkADDCalls compares an ADD's requests with Calico's.
func checkADDCalls(t *testing.T, got, want []apiCall, pod string, gaps ...string) {
	t.Helper()
	t.Logf("ADD %s requests:\n  %s", pod, strings.Join(lines(got), "\n  "))
	// Calico's first request; ours goes out at once with the ADD's other
	// first reads (cni/kdd.go firstReads), so it is among the reads made
	// before any write.
	ci := slices.Index(got, want[0])
	firstWrite := slices.IndexFunc(got, func(c apiCall) bool { return c.Verb != "get" && c.Verb != "list" })
	if ci < 0 || firstWrite >= 0 && firstWrite < ci {
		t.Errorf("ADD %s: requests %v, want Calico's first %v before any write", pod, got, want[0])
	}
	patch := apiCall{"patch", "/api/v1/namespaces/shop/pods/" + pod + "/status"}
	if want[len(want)-1] != patch || got[len(got)-1] != patch {
		t.Errorf("ADD %s: last request %v, want the pod status patch %v (recorded last: %v)", pod, got[len(got)-1], patch, want[len(want)-1])
	}
	checkIPAMWrites(t, "ADD "+pod, got, want, gaps...)
	for _, c := range got {
		if c.Verb != "get" && c.Verb != "list" && c != patch && !strings.HasPrefix(c.Path, "/apis/crd.projectcalico.org/v1/") {
			t.Errorf("ADD %s: unexpected write %v", pod, c)
		}
	}
}

// checkIPAMWrites compares the custom resource writes with Calico's, less
// the first of each of Calico's writes that gaps name.
func checkIPAMWrites(t *testing.T, what string, got, want []apiCall, gaps ...string) {
	t.Helper()
	w := ipamWrites(want)
	for _, g := range gaps {
		i := slices.Index(w, g)
		if i < 0 {
			t.Errorf("%s: Calico made no %q (the known gap is gone: drop it)", what, g)
			continue
		}
		w = slices.Delete(w, i, i+1)
	}
	if g := ipamWrites(got); !slices.Equal(g, w) {
		t.Errorf("%s: custom resource writes\n  %s\nwant Calico's\n  %s", what, strings.Join(g, "\n  "), strings.Join(w, "\n  "))
	}
}

func lines[T fmt.Stringer](xs []T) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = x.String()
	}
	return out
}
