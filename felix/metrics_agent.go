package felix

import (
	"net/netip"
	"time"

	"github.com/calico-aio/calico-aio/felix/calc"
	"github.com/calico-aio/calico-aio/felix/dataplane"
	"github.com/calico-aio/calico-aio/felix/metrics"
)

// recordMetrics hands one apply to the metrics: what the calculation
// wanted (d), what was handed to the dataplane (des), how long it took and
// whether it failed. Runs on the loop, which owns everything it reads.
func (a *agent) recordMetrics(d calc.Desired, des dataplane.Desired, took time.Duration, err error) {
	rec := metrics.Applied{Desired: d, Tables: a.dp.TableCounts(des), Took: took, Err: err,
		Blocks: a.bgpState.Blocks(), BGP: a.bgp != nil}
	if a.bgp != nil {
		rec.Speaker = a.bgp.Speaker()
		rec.Imported = make([]netip.Prefix, 0, len(a.extraRoutes))
		for p := range a.extraRoutes {
			rec.Imported = append(rec.Imported, p)
		}
		rec.Advertised = a.bgpState.Advertisements()
	}
	a.metrics.Record(rec)
}
