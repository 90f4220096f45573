package dataplane

import (
	"fmt"
	"testing"
	"time"

	"github.com/calico-aio/calico-aio/internal/proccpu"
)

// BenchmarkApplyOneEndpoint: the dataplane's apply of one pod added on a
// node with 10 and with 250 pods programmed (each iteration first takes
// the pod away again and writes its route as the CNI plugin does, outside
// the timing). cpu-ns/op is the process's CPU (user + system) during the
// measured applies. Root and a network namespace; routes, neighbours and
// sysctls only (no policy: the iptables tables stay empty).
func BenchmarkApplyOneEndpoint(b *testing.B) {
	needKernel(b)
	for _, n := range []int{10, 250} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			s := newScaleNode(b, n+1)
			dp := New(Config{})
			b.Cleanup(dp.Close)
			without, with := s.desired(n), s.desired(n+1)
			s.apply(b, dp, without)
			var cpu time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				s.apply(b, dp, without)
				s.cniAdd(b, n)
				before := proccpu.MustSelf(b)
				b.StartTimer()
				s.apply(b, dp, with)
				b.StopTimer()
				cpu += proccpu.MustSelf(b) - before
				b.StartTimer()
			}
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
}
