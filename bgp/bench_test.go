package bgp

import (
	"log/slog"
	"net/netip"
	"slices"
	"testing"
	"time"
)

// BenchmarkPropagation measures, over an established pair, the time from
// SetAdvertisements on A to the RouteEvent on B, for 100 prefixes added one
// by one and then withdrawn one by one. Reported: p50/p99 per direction.
func BenchmarkPropagation(b *testing.B) {
	needNetns(b)
	port := nextPort()
	quiet := func(c *Config) { c.Logger = slog.New(slog.DiscardHandler) }
	x := startNode(b, 1, port, false, quiet)
	y := startNode(b, 2, port, false, quiet)
	must(b, x.SetPeers([]Peer{y.peer(x, false, mesh)}))
	must(b, y.SetPeers([]Peer{x.peer(y, true, mesh)}))
	waitFor(b, 10*time.Second, "established", func() bool {
		st := y.PeerStatus()
		return len(st) == 1 && st[0].State == "Established"
	})
	routes := y.Routes()
	// await reads y's events until p has (withdraw=false) or lacks next hops.
	await := func(p netip.Prefix, withdraw bool) {
		timeout := time.After(10 * time.Second)
		for {
			select {
			case batch := <-routes:
				for _, ev := range batch {
					if ev.Prefix == p && (len(ev.NextHops) == 0) == withdraw {
						return
					}
				}
			case <-timeout:
				b.Fatalf("no event for %v (withdraw=%v)", p, withdraw)
			}
		}
	}

	const n = 100
	var add, del []time.Duration
	for b.Loop() {
		set := make([]netip.Prefix, 0, n)
		for i := range n {
			p := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 70, byte(i), 0}), 26)
			set = append(set, p)
			start := time.Now()
			must(b, x.SetAdvertisements(set))
			await(p, false)
			add = append(add, time.Since(start))
		}
		for i := n - 1; i >= 0; i-- {
			p := set[i]
			set = set[:i]
			start := time.Now()
			must(b, x.SetAdvertisements(set))
			await(p, true)
			del = append(del, time.Since(start))
		}
	}
	b.ReportMetric(percentile(add, 50), "add-p50-µs")
	b.ReportMetric(percentile(add, 99), "add-p99-µs")
	b.ReportMetric(percentile(del, 50), "withdraw-p50-µs")
	b.ReportMetric(percentile(del, 99), "withdraw-p99-µs")
}

func percentile(ds []time.Duration, p int) float64 {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return float64(s[(len(s)-1)*p/100].Microseconds())
}
