package storetest

import (
	"context"
	"slices"
	"sort"
	"testing"

	"github.com/calico-aio/calico-aio/store"
)

// storeAll creates every sample at version 1.
func storeAll(t testing.TB, b store.Backend) {
	t.Helper()
	for _, s := range samples() {
		mustCreate(t, b, s, 1)
	}
}

func keysOf(objs []store.Object) []string {
	out := make([]string, len(objs))
	for i, o := range objs {
		out[i] = o.Key.String()
	}
	sort.Strings(out)
	return out
}

// listCases are selections with the samples each selects.
var listCases = []struct {
	opts store.ListOptions
	want []string
}{
	{store.ListOptions{Kind: "IPPool"}, []string{"IPPool(pool-a)"}},
	{store.ListOptions{Kind: "NetworkPolicy"}, []string{"NetworkPolicy(ns1/default.allow-web)", "NetworkPolicy(ns2/default.allow-web)"}},
	{store.ListOptions{Kind: "NetworkPolicy", Namespace: "ns2"}, []string{"NetworkPolicy(ns2/default.allow-web)"}},
	{store.ListOptions{Kind: "NetworkPolicy", Namespace: "ns3"}, []string{}},
	{store.ListOptions{Kind: "GlobalNetworkPolicy"}, []string{}},
	{store.ListOptions{Kind: store.KindIPAMBlock}, []string{"IPAMBlock(10.65.0.0/26)", "IPAMBlock(10.65.0.64/26)", "IPAMBlock(fd00:65::/122)"}},
	{store.ListOptions{Kind: store.KindIPAMBlock, Family: 6}, []string{"IPAMBlock(fd00:65::/122)"}},
	{store.ListOptions{Kind: store.KindBlockAffinity}, []string{"BlockAffinity(node-a/10.65.0.0/26)", "BlockAffinity(node-a/fd00:65::/122)", "BlockAffinity(node-b/10.65.0.64/26)"}},
	{store.ListOptions{Kind: store.KindBlockAffinity, Node: "node-a"}, []string{"BlockAffinity(node-a/10.65.0.0/26)", "BlockAffinity(node-a/fd00:65::/122)"}},
	{store.ListOptions{Kind: store.KindBlockAffinity, Node: "node-a", Family: 4}, []string{"BlockAffinity(node-a/10.65.0.0/26)"}},
	{store.ListOptions{Kind: store.KindBlockAffinity, Node: "node-c"}, []string{}},
	{store.ListOptions{Kind: store.KindIPAMHandle}, []string{"IPAMHandle(k8s-pod-network.c1)"}},
	{store.ListOptions{Kind: store.KindIPAMConfig}, []string{"IPAMConfig(default)"}},
}

func checkList(t *testing.T, b store.Backend) {
	storeAll(t, b)
	values := map[store.Key][]byte{}
	for _, s := range samples() {
		values[s.key] = s.value(1)
	}
	for _, c := range listCases {
		objs, rev, err := b.List(context.Background(), c.opts)
		if err != nil {
			t.Errorf("list %+v: %v", c.opts, err)
			continue
		}
		if rev == "" {
			t.Errorf("list %+v: no revision", c.opts)
		}
		if got := keysOf(objs); !slices.Equal(got, c.want) {
			t.Errorf("list %+v = %v, want %v", c.opts, got, c.want)
		}
		for _, o := range objs {
			if o.Revision == "" {
				t.Errorf("list %+v: %s has no revision", c.opts, o.Key)
			}
			sameJSON(t, "listed "+o.Key.String(), o.Value, values[o.Key])
		}
	}
}

func checkReadMany(t *testing.T, b store.Backend) {
	storeAll(t, b)
	all := samples()
	missing := store.Key{Kind: store.KindIPAMBlock, Name: "10.65.1.0/26"}
	reads := []store.Read{{Key: all[0].key}, {Key: missing}}
	for _, c := range listCases {
		reads = append(reads, store.Read{List: &c.opts})
	}
	reads = append(reads, store.Read{Key: all[3].key})
	got, err := b.ReadMany(context.Background(), reads)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(reads) {
		t.Fatalf("ReadMany gave %d results for %d reads", len(got), len(reads))
	}
	want := [][]string{{all[0].key.String()}, {}}
	for _, c := range listCases {
		want = append(want, c.want)
	}
	want = append(want, []string{all[3].key.String()})
	for i := range reads {
		if k := keysOf(got[i]); !slices.Equal(k, want[i]) {
			t.Errorf("ReadMany read %d (%+v) = %v, want %v", i, reads[i], k, want[i])
		}
		for _, o := range got[i] {
			cur, err := b.Get(context.Background(), o.Key)
			if err != nil || cur.Revision != o.Revision {
				t.Errorf("ReadMany %s at %q; Get says %q (%v)", o.Key, o.Revision, cur.Revision, err)
			}
		}
	}
	if got, err := b.ReadMany(context.Background(), nil); err != nil || len(got) != 0 {
		t.Errorf("ReadMany of nothing = %v, %v", got, err)
	}
}
