package e2e

import (
	"context"
	"fmt"
	"testing"

	"github.com/calico-aio/calico-aio/store/api"
)

// BenchmarkAgentScaleTiers: 250 local endpoints and 5 tiers of 200
// policies each (issue #13's target: policy write -> enforced p99 under
// 100 ms, full programming under 3 s). The tiers have distinct orders;
// the first, second and fourth end in Pass, the others in Deny; every
// fourth policy's rule is a Pass. The probe policies are written into the
// middle tier. Reported as BenchmarkAgentScale is, and then the idle
// agent's CPU over FELIX_BENCH_IDLE (default 10 minutes; issue #25's
// target: under 0.2% of one core).
func BenchmarkAgentScaleTiers(b *testing.B) {
	const eps, tiers, perTier = 250, 5, 200
	e := newCNIEnv(b, 31)
	ctx := context.Background()
	scaleEndpoints(b, e, eps)
	for t := 0; t < tiers; t++ {
		tr := kindOf("Tier").NewObject().(*api.Tier)
		order := float64(100 * (t + 1))
		tr.Metadata.Name, tr.Spec.Order, tr.Spec.DefaultAction = fmt.Sprintf("bench-%d", t), &order, api.ActionDeny
		if t == 0 || t == 1 || t == 3 {
			tr.Spec.DefaultAction = api.ActionPass
		}
		if _, err := e.cl.CreateResource(ctx, tr); err != nil {
			b.Fatal(err)
		}
		for i := 0; i < perTier; i++ {
			action := api.ActionAllow
			if i%4 == 0 {
				action = api.ActionPass
			}
			n := t*perTier + i
			p := scalePolicy(fmt.Sprintf("bench-%d-pol-%03d", t, i), float64(i), n, action)
			p.Spec.Tier = tr.Metadata.Name
			if _, err := e.cl.CreateResource(ctx, p); err != nil {
				b.Fatal(err)
			}
		}
	}
	what := fmt.Sprintf("%d endpoints, %d tiers x %d policies", eps, tiers, perTier)
	reportIdleCPU(b, runAgentScale(b, e, what, "bench-2"), what)
}
