package kube_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/calico-aio/calico-aio/store/kube"
	"github.com/calico-aio/calico-aio/store/model"
)

func put(s sample, v int, rev model.Revision) model.Write {
	return model.Write{Op: model.OpPut, Key: s.key, Value: s.value(v), Revision: rev}
}

// checkCommit: writes apply one object at a time in the order given and
// stop at the first that loses its precondition (nothing after it is
// sent; nothing before it undone).
func checkCommit(t *testing.T, c *cluster) {
	ctx := context.Background()
	s := samples("commit", 4)
	block, affinity, handle := s[2], s[4], s[6]
	if c.b.Atomic() {
		t.Error("the Kubernetes backend says its Commit is atomic")
	}
	stale := mustCreate(t, c.b, block, 1)
	cur, err := c.b.Update(ctx, block.key, block.value(2), stale)
	if err != nil {
		t.Fatal(err)
	}
	affRev := mustCreate(t, c.b, affinity, 1)
	before := map[string]int{}
	for _, r := range []string{"ipamhandles", "ipamblocks", "blockaffinities"} {
		before[r] = len(c.requests(t, r))
	}
	revs, err := c.b.Commit(ctx, []model.Write{put(handle, 1, ""), put(block, 3, stale), put(affinity, 2, affRev)})
	n := len(revs)
	var ce *model.ConflictError
	if n != 1 || !errors.As(err, &ce) || ce.Key != block.key {
		t.Fatalf("commit = %d, %v; want the handle applied, then a *ConflictError naming %s", n, err, block.key)
	}
	for r, want := range map[string][]string{"ipamhandles": {"create"}, "ipamblocks": {"update"}, "blockaffinities": nil} {
		var got []string
		for _, ev := range c.requests(t, r)[before[r]:] {
			got = append(got, ev.Verb)
		}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("%s requests %v, want %v", r, got, want)
		}
	}
	if _, err := c.b.Get(ctx, handle.key); err != nil {
		t.Errorf("handle after the commit: %v, want it created", err)
	}
	if o, _ := c.b.Get(ctx, block.key); o.Revision != cur {
		t.Errorf("block at %q, want untouched at %q", o.Revision, cur)
	}
	// Creating what exists, or writing what is gone, loses too.
	if _, err := c.b.Commit(ctx, []model.Write{put(handle, 2, "")}); !errors.Is(err, model.ErrConflict) {
		t.Errorf("commit creating an existing handle: %v, want a conflict", err)
	}
	if err := c.b.Delete(ctx, handle.key, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := c.b.Commit(ctx, []model.Write{{Op: model.OpDelete, Key: handle.key, Revision: cur}}); !errors.Is(err, model.ErrConflict) {
		t.Errorf("commit deleting a deleted handle: %v, want a conflict", err)
	}
}

// checkHandleDelete: a handle's delete carries the resourceVersion and,
// as Calico's, the uid precondition.
func checkHandleDelete(t *testing.T, c *cluster) {
	ctx := context.Background()
	h := samples("hdel", 5)[6]
	rev := mustCreate(t, c.b, h, 1)
	o, err := c.b.Get(ctx, h.key)
	if err != nil {
		t.Fatal(err)
	}
	cr := c.raw(t, "/apis/crd.projectcalico.org/v1/ipamhandles/k8s-pod-network.hdelc1")
	uid := cr["metadata"].(map[string]any)["uid"]
	before := len(c.requests(t, "ipamhandles"))
	if err := c.b.Delete(ctx, h.key, o.Revision); err != nil {
		t.Fatal(err)
	}
	reqs := c.requests(t, "ipamhandles")[before:]
	if len(reqs) != 1 || reqs[0].Verb != "delete" {
		t.Fatalf("requests %+v, want one delete", reqs)
	}
	var opts struct {
		Preconditions struct{ UID, ResourceVersion string }
	}
	requestObject(t, reqs[0], &opts)
	if opts.Preconditions.UID != uid || opts.Preconditions.ResourceVersion != string(rev) {
		t.Errorf("delete preconditions %+v, want uid %v and resourceVersion %s", opts.Preconditions, uid, rev)
	}
}

// checkRefusals: what the backend cannot store as Calico does is refused,
// naming the problem, and nothing is written.
func checkRefusals(t *testing.T, b *kube.Backend) {
	ctx := context.Background()
	pool := model.Key{Kind: "IPPool", Name: "refused"}
	cases := []struct {
		key   model.Key
		value string
		want  string
	}{
		{model.Key{Kind: "Gadget", Name: "x"}, `{}`, `kind "Gadget" is not stored`},
		{model.Key{Kind: "WorkloadEndpoint", Namespace: "ns1", Name: "x"}, `{}`, "not a Kubernetes pod's WorkloadEndpoint"},
		{model.Key{Kind: model.KindIPAMBlock, Name: "10.65.9.1/26"}, `{}`, "not canonical"},
		{model.Key{Kind: model.KindBlockAffinity, Name: "10.65.9.0/26"}, `{"state":"pending"}`, "names its node"},
		{model.Key{Kind: model.KindIPAMConfig, Name: "other"}, `{}`, `named "default"`},
		{model.Key{Kind: "NetworkPolicy", Name: "x"}, `{}`, "namespaced"},
		{pool, `{"kind":"IPPool","apiVersion":"projectcalico.org/v3","metadata":{"name":"other"},"spec":{"cidr":"10.9.0.0/16"}}`, "not the key's object"},
		{pool, `{"kind":"IPPool","apiVersion":"projectcalico.org/v3","metadata":{"name":"refused"},"spec":{"cidr":"10.9.0.0/16","bogusField":1}}`, "bogusField"},
		{model.Key{Kind: model.KindIPAMBlock, Name: "10.65.9.0/26"}, `{"cidr":"10.65.8.0/26"}`, "not the key's object"},
	}
	for _, c := range cases {
		_, err := b.Create(ctx, c.key, []byte(c.value))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("create %s %s: %v, want an error with %q", c.key, c.value, err, c.want)
		}
	}
	if _, err := b.Get(ctx, pool); !errors.Is(err, model.ErrNotFound) {
		t.Errorf("refused pool: %v, want nothing stored", err)
	}
}
