package ipam_test

import (
	"context"
	"testing"

	"github.com/calico-aio/calico-aio/ipam"
	"github.com/calico-aio/calico-aio/store"
	"github.com/calico-aio/calico-aio/store/api"
	"github.com/calico-aio/calico-aio/store/storetest"
)

// lagging answers recent reads (store.RecentReads) as a watch cache that
// has not yet seen some objects: those of hidden kinds are missing from
// them. Other reads are the store's own.
type lagging struct {
	store.Backend
	hidden map[string]bool // kinds
}

func (l *lagging) ReadMany(ctx context.Context, reads []store.Read) ([][]store.Object, error) {
	out, err := l.Backend.ReadMany(ctx, reads)
	if err != nil || !store.ReadsRecent(ctx) {
		return out, err
	}
	for i := range out {
		kept := out[i][:0:0]
		for _, o := range out[i] {
			if !l.hidden[o.Key.Kind] {
				kept = append(kept, o)
			}
		}
		out[i] = kept
	}
	return out, nil
}

// TestRecentSnapshotDecidesNothingFromAbsence: the prefetched snapshot is a
// recent read; when it does not yet show the node's block (the cache lags
// the claim just made), the assignment reads the latest state rather than
// claim a second block for the node.
func TestRecentSnapshotDecidesNothingFromAbsence(t *testing.T) {
	etcd := storetest.StartEtcd(t).Client(t)
	l := &lagging{Backend: etcd.Backend, hidden: map[string]bool{}}
	e := &env{t: t, c: store.NewClient(l)}
	e.al = ipam.New(e.c)
	e.pool("p4", "10.20.0.0/24", func(p *api.IPPool) { p.Spec.BlockSize = 28 })
	hints := ipam.NewBlockHints()
	first, err := ipam.New(e.c).WithHints(hints).AutoAssign(ctx, ipam.AutoAssignArgs{Num4: 1, HandleID: "net.a", Node: "node1"})
	if err != nil {
		t.Fatal(err)
	}
	l.hidden[store.KindBlockAffinity], l.hidden[store.KindIPAMBlock] = true, true

	al := ipam.New(e.c).WithHints(hints)
	al.Prefetch(store.RecentReads(ctx), "node1", "net.b")
	got, err := al.AutoAssign(ctx, ipam.AutoAssignArgs{Num4: 1, HandleID: "net.b", Node: "node1"})
	if err != nil {
		t.Fatal(err)
	}
	affs, err := e.al.ListAffinities(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(affs) != 1 {
		t.Errorf("node1 has %d block affinities %+v, want the one block it had (first %v, second %v)", len(affs), affs, first.IPv4, got.IPv4)
	}
}
