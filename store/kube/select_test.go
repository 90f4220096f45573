package kube_test

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/calico-aio/calico-aio/store/kube"
	"github.com/calico-aio/calico-aio/store/model"
)

// api-calls.json is every API request real Calico v3.32.1's CNI plugin and
// calico-ipam made in the recording (a copy of store/kdd/testdata's).
//
//go:embed testdata/api-calls.json
var apiCallsJSON []byte

// recordedAffinityList is the request Calico's IPAM listed node1's IPv4
// affinities with.
func recordedAffinityList(t *testing.T) string {
	t.Helper()
	var f struct {
		Operations []struct{ Calls []struct{ Verb, Path string } }
	}
	if err := json.Unmarshal(apiCallsJSON, &f); err != nil {
		t.Fatal(err)
	}
	for _, op := range f.Operations {
		for _, c := range op.Calls {
			if c.Verb == "list" && strings.Contains(c.Path, "/blockaffinities?") {
				return c.Path
			}
		}
	}
	t.Fatal("no affinity list recorded")
	return ""
}

// checkAffinitySelector: listing node1's IPv4 affinities sends the
// request Calico's IPAM sends: the same path, label selector (in the
// same order) and page size; client-go adds only its request timeout.
func checkAffinitySelector(t *testing.T, c *cluster) {
	want := recordedAffinityList(t)
	before := len(c.requests(t, "blockaffinities"))
	if _, _, err := c.b.List(context.Background(), model.ListOptions{Kind: model.KindBlockAffinity, Node: "node1", Family: 4}); err != nil {
		t.Fatal(err)
	}
	reqs := c.requests(t, "blockaffinities")[before:]
	if len(reqs) != 1 || reqs[0].Verb != "list" || withoutTimeout(t, reqs[0].RequestURI) != want {
		t.Errorf("requests %+v, want one list %s", reqs, want)
	}
}

// withoutTimeout is a request URI without its timeout parameter.
func withoutTimeout(t *testing.T, uri string) string {
	t.Helper()
	path, query, _ := strings.Cut(uri, "?")
	var kept []string
	for _, p := range strings.Split(query, "&") {
		if !strings.HasPrefix(p, "timeout=") {
			kept = append(kept, p)
		}
	}
	return path + "?" + strings.Join(kept, "&")
}

func keysOf(objs []model.Object) []string {
	out := make([]string, len(objs))
	for i, o := range objs {
		out[i] = o.Key.String()
	}
	sort.Strings(out)
	return out
}

// checkList: each selection lists what it selects, with revisions.
func checkList(t *testing.T, b *kube.Backend) {
	for _, p := range []struct {
		name string
		n    int
	}{{"la", 2}, {"lb", 3}} {
		for _, s := range samples(p.name, p.n) {
			mustCreate(t, b, s, 1)
		}
	}
	cases := []struct {
		opts model.ListOptions
		want []string
	}{
		{model.ListOptions{Kind: "NetworkPolicy", Namespace: "ns1"}, []string{"NetworkPolicy(ns1/la-allow-web)", "NetworkPolicy(ns1/lb-allow-web)"}},
		{model.ListOptions{Kind: "NetworkPolicy", Namespace: "ns9"}, []string{}},
		{model.ListOptions{Kind: model.KindIPAMBlock, Family: 6}, []string{"IPAMBlock(fd00:65:2::/122)", "IPAMBlock(fd00:65:3::/122)"}},
		{model.ListOptions{Kind: model.KindBlockAffinity, Node: "la-node"}, []string{"BlockAffinity(la-node/10.65.2.0/26)", "BlockAffinity(la-node/fd00:65:2::/122)"}},
		{model.ListOptions{Kind: model.KindBlockAffinity, Node: "lb-node", Family: 6}, []string{"BlockAffinity(lb-node/fd00:65:3::/122)"}},
		{model.ListOptions{Kind: model.KindBlockAffinity, Node: "lc-node"}, []string{}},
	}
	for _, c := range cases {
		objs, rev, err := b.List(context.Background(), c.opts)
		if err != nil || rev == "" {
			t.Errorf("list %+v: revision %q, %v", c.opts, rev, err)
			continue
		}
		if got := keysOf(objs); !slices.Equal(got, c.want) {
			t.Errorf("list %+v = %v, want %v", c.opts, got, c.want)
		}
	}
	checkReadMany(t, b)
	objs, _, err := b.List(context.Background(), model.ListOptions{Kind: model.KindIPAMHandle})
	if got := keysOf(objs); err != nil || !slices.Contains(got, "IPAMHandle(k8s-pod-network.laC1)") {
		t.Errorf("list handles = %v, %v; want the handle ID as written, not the lower-case CR name", got, err)
	}
	for _, bad := range []model.ListOptions{
		{Kind: "IPPool", Namespace: "ns1"},
		{Kind: "IPPool", Node: "n"},
		{Kind: model.KindIPAMBlock, Family: 5},
		{Kind: "Profile", Namespace: "ns1"},
		{Kind: "Gadget"},
	} {
		if _, _, err := b.List(context.Background(), bad); err == nil || errors.Is(err, model.ErrNotFound) {
			t.Errorf("list %+v: %v, want a refusal", bad, err)
		}
		if err := b.Watch(context.Background(), bad, func(model.Event) {}); err == nil {
			t.Errorf("watch %+v: no refusal", bad)
		}
	}
}

// checkReadMany: one result per read, in order: the object or none, or
// the list (the objects checkList stored).
func checkReadMany(t *testing.T, b *kube.Backend) {
	pool := model.Key{Kind: "IPPool", Name: "la-pool"}
	affs := model.ListOptions{Kind: model.KindBlockAffinity, Node: "lb-node"}
	got, err := b.ReadMany(context.Background(), []model.Read{
		{Key: pool}, {Key: model.Key{Kind: "IPPool", Name: "missing"}}, {List: &affs},
	})
	if err != nil || len(got) != 3 {
		t.Fatalf("ReadMany = %d results, %v; want 3", len(got), err)
	}
	if keys := keysOf(got[0]); !slices.Equal(keys, []string{pool.String()}) || len(got[1]) != 0 {
		t.Errorf("ReadMany keys: %v and %v, want %s and nothing", keys, keysOf(got[1]), pool)
	}
	if keys := keysOf(got[2]); len(keys) != 2 {
		t.Errorf("ReadMany list of %+v = %v, want lb-node's two affinities", affs, keys)
	}
}

// checkPages: a list longer than a page is read page by page (Calico's
// 500) and returned whole.
func checkPages(t *testing.T, c *cluster) {
	const n = 520
	for i := range n {
		h := handleSample(fmt.Sprintf("k8s-pod-network.page%03d", i), "10.67.0.0/26")
		mustCreate(t, c.b, h, 1)
	}
	before := c.lists(t, "ipamhandles")
	objs, rev, err := c.b.List(context.Background(), model.ListOptions{Kind: model.KindIPAMHandle})
	pages := 0
	for _, k := range keysOf(objs) {
		if strings.HasPrefix(k, "IPAMHandle(k8s-pod-network.page") {
			pages++
		}
	}
	if err != nil || rev == "" || pages != n {
		t.Errorf("list = %d of the %d handles at %q, %v", pages, n, rev, err)
	}
	if got := c.lists(t, "ipamhandles") - before; got != 2 {
		t.Errorf("%d list requests, want 2 pages", got)
	}
}
