package calicoipam_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/calico-aio/calico-aio/e2e/calicoipam"
	"github.com/calico-aio/calico-aio/e2e/kubeapi"
	"github.com/calico-aio/calico-aio/store/storetest"
)

// obj is a JSON object decoded with exact numbers.
type obj = map[string]any

// startAPIServer runs a real kube-apiserver on an embedded etcd with our
// CRDs (build/k8s/crds.yaml) installed.
func startAPIServer(t *testing.T) *kubeapi.Server {
	t.Helper()
	kapi := kubeapi.Start(t, storetest.StartEtcd(t).Endpoints()[0])
	kapi.InstallCRDs(t, "../../build/k8s/crds.yaml")
	// An Established CRD may still answer 429 while its storage starts.
	for _, plural := range []string{"clusterinformations", "ipamconfigs", "ipamblocks", "blockaffinities",
		"ipamhandles", "ippools", "ipreservations"} {
		path := "/apis/crd.projectcalico.org/v1/" + plural
		for tries := 0; ; tries++ {
			code, body := kapi.Do(t, http.MethodGet, path, nil)
			if code == http.StatusOK {
				break
			}
			if tries == 100 {
				t.Fatalf("GET %s: %d %s", path, code, body)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return kapi
}

// call is one API request as the apiserver's audit log names it.
type call struct {
	Verb, Path string // path with its query in canonical order
	Code       int
	Body       json.RawMessage
}

func (c call) String() string { return c.Verb + " " + c.Path }

// recorder is an http.RoundTripper that notes every request it passes on.
type recorder struct {
	next  http.RoundTripper
	hook  func(*http.Request) // called before each request is passed on (may be nil)
	mu    sync.Mutex
	calls []call
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		body = b
		req.Body = io.NopCloser(bytes.NewReader(b))
	}
	if r.hook != nil {
		r.hook(req)
	}
	resp, err := r.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.calls = append(r.calls, call{Verb: auditVerb(req.Method, req.URL.Path), Path: canonicalPath(req.URL.Path, req.URL.RawQuery),
		Code: resp.StatusCode, Body: body})
	r.mu.Unlock()
	return resp, nil
}

// take returns the calls recorded since the last take.
func (r *recorder) take() []call {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.calls
	r.calls = nil
	return out
}

// auditVerb is the verb the apiserver's audit log gives a request: a GET of
// a collection is a list.
func auditVerb(method, path string) string {
	switch method {
	case http.MethodGet:
		segs := strings.Split(strings.Trim(path, "/"), "/")
		// /api/v1/<...> or /apis/<group>/<version>/<...>: an odd number
		// of segments after the version is a collection.
		rest := len(segs) - 2
		if segs[0] == "apis" {
			rest = len(segs) - 3
		}
		if rest%2 == 1 {
			return "list"
		}
		return "get"
	case http.MethodPost:
		return "create"
	case http.MethodPut:
		return "update"
	}
	return strings.ToLower(method)
}

// canonicalPath is path with its query in sorted order.
func canonicalPath(path, rawQuery string) string {
	if rawQuery == "" {
		return path
	}
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return path + "?" + rawQuery
	}
	return path + "?" + q.Encode()
}

// newDouble is a double on kapi whose requests rec notes (rec may be nil).
func newDouble(kapi *kubeapi.Server, rec *recorder, opts ...calicoipam.Option) *calicoipam.Double {
	client := kapi.HTTPClient()
	if rec != nil {
		rec.next = client.Transport
		client.Transport = rec
	}
	return calicoipam.New(calicoipam.Conn{URL: kapi.URL, Token: kapi.Token, Client: client}, opts...)
}

// decodeExact decodes JSON keeping numbers as written (64-bit exact).
func decodeExact(t *testing.T, b []byte) obj { return kubeapi.DecodeExact(t, b) }

// mustDo sends a request as the admin and fails the test unless the answer
// has one of the codes.
func mustDo(t *testing.T, kapi *kubeapi.Server, method, path string, body any, codes ...int) []byte {
	t.Helper()
	code, out := kapi.Do(t, method, path, body)
	for _, c := range codes {
		if code == c {
			return out
		}
	}
	t.Fatalf("%s %s: %d %s", method, path, code, out)
	return nil
}

// recordedObjects are testdata/objects.json's versions per key.
type recordedVersion struct {
	Step    string          `json:"step"`
	Deleted bool            `json:"deleted"`
	Object  json.RawMessage `json:"object"`
}

func loadObjects(t *testing.T) map[string][]recordedVersion {
	t.Helper()
	b, err := os.ReadFile("testdata/objects.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Objects map[string][]recordedVersion `json:"objects"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	return doc.Objects
}

// serverSet are the metadata members the apiserver sets itself.
var serverSet = []string{"resourceVersion", "uid", "creationTimestamp", "generation", "managedFields"}

// forCreate is a recorded object without what the apiserver sets.
func forCreate(t *testing.T, raw json.RawMessage) obj {
	t.Helper()
	o := decodeExact(t, raw)
	meta := o["metadata"].(obj)
	for _, k := range serverSet {
		delete(meta, k)
	}
	delete(o, "status")
	return o
}

// collection is where an objects.json key's object is created.
func collection(key string) string {
	kind, name, _ := strings.Cut(key, "/")
	switch kind {
	case "Node":
		return "/api/v1/nodes"
	case "Pod":
		ns, _, _ := strings.Cut(name, "/")
		return "/api/v1/namespaces/" + ns + "/pods"
	}
	return "/apis/crd.projectcalico.org/v1/" + strings.ToLower(kind) + "s"
}

// createRecorded creates the first recorded version of each key (a pod
// without its annotations: web-3 is recorded first after its ADD).
func createRecorded(t *testing.T, kapi *kubeapi.Server, objects map[string][]recordedVersion, keys ...string) {
	t.Helper()
	for _, key := range keys {
		o := forCreate(t, objects[key][0].Object)
		if strings.HasPrefix(key, "Pod/") {
			delete(o["metadata"].(obj), "annotations")
		}
		mustDo(t, kapi, http.MethodPost, collection(key), o, http.StatusCreated)
	}
}

// createNamespace creates the namespace ns.
func createNamespace(t *testing.T, kapi *kubeapi.Server, ns string) {
	t.Helper()
	mustDo(t, kapi, http.MethodPost, "/api/v1/namespaces",
		obj{"apiVersion": "v1", "kind": "Namespace", "metadata": obj{"name": ns}}, http.StatusCreated)
}

// seed creates, as recorded before the first CNI call, the namespace shop,
// ClusterInformation, the pools, the reservation, the node node1 and the
// pods web-1, web-2 and web-3.
func seed(t *testing.T, kapi *kubeapi.Server, objects map[string][]recordedVersion) {
	t.Helper()
	createNamespace(t, kapi, "shop")
	createRecorded(t, kapi, objects, "ClusterInformation/default", "IPPool/pool-v4", "IPPool/pool-v6",
		"IPReservation/reserved-tail", "Node/node1", "Pod/shop/web-1", "Pod/shop/web-2", "Pod/shop/web-3")
}
