package libnetwork

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/calico-aio/calico-aio/cni"
	"github.com/calico-aio/calico-aio/ipam"
	"github.com/calico-aio/calico-aio/store"
	"github.com/calico-aio/calico-aio/store/api"
	"github.com/calico-aio/calico-aio/store/storetest"
)

// fakeKernel holds the veth pairs the driver made (by host end). Every
// pair counts as handed to a container (its other end in a namespace).
type fakeKernel struct {
	mu    sync.Mutex
	links map[string]vethSpec
}

// probe: every pair is in a container.
func (f *fakeKernel) probe(name string) (cni.IfaceState, error) {
	if _, ok := f.links[name]; ok {
		return cni.IfaceLive, nil
	}
	return cni.IfaceAbsent, nil
}

func (f *fakeKernel) chooseHost(h cni.HostIface) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	name, _, err := h.ChooseBy(f.probe)
	return name, err
}

func (f *fakeKernel) addVeth(v vethSpec) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	name, _, err := v.iface.ChooseBy(f.probe)
	if err != nil {
		return "", err
	}
	v.host = name
	f.links[name] = v
	return name, nil
}

func (f *fakeKernel) delVeth(host string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.links, host)
	return nil
}

func (f *fakeKernel) names() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Sorted(maps.Keys(f.links))
}

// env is a driver over a real embedded etcd with a fake kernel, served
// over HTTP.
type env struct {
	t    *testing.T
	cl   *store.Client
	kern *fakeKernel
	url  string
	// netNames resolves network IDs (the fake Docker).
	netNames map[string]string
}

func newEnv(t *testing.T, mod func(*Config)) *env {
	t.Helper()
	e := &env{t: t, cl: storetest.StartEtcd(t).Client(t), kern: &fakeKernel{links: map[string]vethSpec{}},
		netNames: map[string]string{}}
	cfg := Config{Node: "node1", Store: e.cl, NetworkName: func(_ context.Context, id string) (string, error) {
		if n, ok := e.netNames[id]; ok {
			return n, nil
		}
		return "", io.ErrUnexpectedEOF
	}}
	if mod != nil {
		mod(&cfg)
	}
	d, err := newDriver(cfg)
	if err != nil {
		t.Fatal(err)
	}
	d.kern = e.kern
	srv := httptest.NewServer(d.mux("NetworkDriver", "IpamDriver"))
	t.Cleanup(srv.Close)
	e.url = srv.URL
	return e
}

// post sends a raw body and returns the status and body.
func (e *env) post(path, body string) (int, string) {
	e.t.Helper()
	resp, err := http.Post(e.url+path, "application/vnd.docker.plugins.v1.2+json", strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// call sends req and decodes the answer into resp; an error answer fails.
func (e *env) call(path string, req, resp any) {
	e.t.Helper()
	code, body := e.post(path, mustJSON(e.t, req))
	if code != http.StatusOK || strings.Contains(body, `"Err"`) {
		e.t.Fatalf("%s: %d %s", path, code, body)
	}
	if resp != nil {
		if err := json.Unmarshal([]byte(body), resp); err != nil {
			e.t.Fatalf("%s: %v in %s", path, err, body)
		}
	}
}

// callErr sends req and returns the Err of the answer, which must be a
// 200 with {"Err"}.
func (e *env) callErr(path string, req any) string {
	e.t.Helper()
	code, body := e.post(path, mustJSON(e.t, req))
	var r ErrorResponse
	if err := json.Unmarshal([]byte(body), &r); err != nil || code != http.StatusOK || r.Err == "" {
		e.t.Fatalf("%s: want 200 with Err, got %d %s", path, code, body)
	}
	return r.Err
}

func mustJSON(t testing.TB, v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	var b bytes.Buffer
	if err := json.NewEncoder(&b).Encode(v); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func (e *env) pool(name, cidr string) {
	e.t.Helper()
	k, _ := api.LookupKind("IPPool")
	p := k.NewObject().(*api.IPPool)
	p.Metadata.Name, p.Spec.CIDR = name, cidr
	if _, err := e.cl.CreateResource(context.Background(), p); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) handles() []string {
	e.t.Helper()
	hs, err := ipam.New(e.cl).ListHandles(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, h := range hs {
		out = append(out, h.ID)
	}
	return out
}

func (e *env) endpoints() []api.Resource {
	e.t.Helper()
	weps, _, err := e.cl.ListResources(context.Background(), wepKind, "")
	if err != nil {
		e.t.Fatal(err)
	}
	return weps
}

// Docker IDs are 64 hex digits.
const (
	netID = "3c7a0b1e9d2f4a6b8c0d2e4f6a8b0c2d4e6f8a0b2c4d6e8f0a2b4c6d8e0f2a4b"
	epID  = "9f8e7d6c5b4a39281706f5e4d3c2b1a09f8e7d6c5b4a39281706f5e4d3c2b1a0"
	epID2 = "0a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f9"
)
