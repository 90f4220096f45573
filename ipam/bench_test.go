package ipam_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/calico-aio/calico-aio/ipam"
	"github.com/calico-aio/calico-aio/store"
	"github.com/calico-aio/calico-aio/store/api"
	"github.com/calico-aio/calico-aio/store/embedded"
)

// benchEtcd starts an embedded etcd with fsync on, as in production.
func benchEtcd(b *testing.B) *store.Client {
	cu, _ := embedded.FreeLoopbackURL()
	pu, _ := embedded.FreeLoopbackURL()
	srv, err := embedded.Start(context.Background(), embedded.Config{Name: "bench", DataDir: b.TempDir(), ClientURL: cu, PeerURL: pu})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(srv.Close)
	c, err := store.New(store.Config{Endpoints: srv.Endpoints()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Close() })
	k, _ := api.LookupKind("IPPool")
	p := k.NewObject().(*api.IPPool)
	p.Metadata.Name, p.Spec.CIDR = "bench", "10.128.0.0/16"
	if _, err := c.CreateResource(context.Background(), p); err != nil {
		b.Fatal(err)
	}
	return c
}

func percentile(d []time.Duration, q float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[int(q*float64(len(s)-1))]
}

// BenchmarkIPAM measures steady-state allocation (a node with room in its
// own block): AutoAssign and Release latency, etcd round trips per
// allocation, and throughput for one node and for eight nodes at once.
func BenchmarkIPAM(b *testing.B) {
	ctx := context.Background()
	const ops = 1000
	b.Run("steady-1node", func(b *testing.B) {
		c := benchEtcd(b)
		al := ipam.New(c)
		if _, err := al.AutoAssign(ctx, ipam.AutoAssignArgs{Num4: 1, HandleID: "bench.warm", Node: "n0"}); err != nil {
			b.Fatal(err)
		}
		var assign, release []time.Duration
		var rts int64
		start := time.Now()
		for i := 0; i < ops; i++ {
			h := fmt.Sprintf("bench.c%d", i)
			before := al.Stats().RoundTrips
			t0 := time.Now()
			if _, err := al.AutoAssign(ctx, ipam.AutoAssignArgs{Num4: 1, HandleID: h, Node: "n0"}); err != nil {
				b.Fatal(err)
			}
			t1 := time.Now()
			rts += al.Stats().RoundTrips - before
			if _, err := al.ReleaseByHandle(ctx, h); err != nil {
				b.Fatal(err)
			}
			assign = append(assign, t1.Sub(t0))
			release = append(release, time.Since(t1))
		}
		elapsed := time.Since(start)
		b.ReportMetric(float64(percentile(assign, 0.5).Microseconds())/1000, "assign-p50-ms")
		b.ReportMetric(float64(percentile(assign, 0.99).Microseconds())/1000, "assign-p99-ms")
		b.ReportMetric(float64(percentile(release, 0.5).Microseconds())/1000, "release-p50-ms")
		b.ReportMetric(float64(percentile(release, 0.99).Microseconds())/1000, "release-p99-ms")
		b.ReportMetric(float64(rts)/ops, "etcd-RTs/assign")
		b.ReportMetric(float64(2*ops)/elapsed.Seconds(), "ops/s")
	})
	b.Run("parallel-8nodes", func(b *testing.B) {
		c := benchEtcd(b)
		const nodes = 8
		var wg sync.WaitGroup
		var mu sync.Mutex
		var lat []time.Duration
		als := make([]*ipam.Allocator, nodes)
		for n := range als {
			als[n] = ipam.New(c)
			if _, err := als[n].AutoAssign(ctx, ipam.AutoAssignArgs{Num4: 1, HandleID: fmt.Sprintf("bench.warm%d", n), Node: fmt.Sprintf("n%d", n)}); err != nil {
				b.Fatal(err)
			}
		}
		start := time.Now()
		for n := 0; n < nodes; n++ {
			wg.Add(1)
			go func(n int) {
				defer wg.Done()
				var mine []time.Duration
				for i := 0; i < ops/nodes*2; i++ {
					h := fmt.Sprintf("bench.n%d.c%d", n, i)
					t0 := time.Now()
					if _, err := als[n].AutoAssign(ctx, ipam.AutoAssignArgs{Num4: 1, HandleID: h, Node: fmt.Sprintf("n%d", n)}); err != nil {
						b.Error(err)
						return
					}
					if _, err := als[n].ReleaseByHandle(ctx, h); err != nil {
						b.Error(err)
						return
					}
					mine = append(mine, time.Since(t0))
				}
				mu.Lock()
				lat = append(lat, mine...)
				mu.Unlock()
			}(n)
		}
		wg.Wait()
		elapsed := time.Since(start)
		var conflicts int64
		for _, al := range als {
			conflicts += al.Stats().Conflicts
		}
		b.ReportMetric(float64(2*len(lat))/elapsed.Seconds(), "ops/s")
		b.ReportMetric(float64(percentile(lat, 0.5).Microseconds())/1000, "assign+release-p50-ms")
		b.ReportMetric(float64(percentile(lat, 0.99).Microseconds())/1000, "assign+release-p99-ms")
		b.ReportMetric(float64(conflicts), "conflicts")
	})
}
