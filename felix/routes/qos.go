package routes

import (
	"log/slog"

	"github.com/calico-aio/calico-aio/felix/dataplane"
	"github.com/calico-aio/calico-aio/store/api"
)

// Egress is how endpoints' egress bandwidth is enforced: shaped on an ifb
// device where the kernel can redirect to it, else policed by iptables
// rules (docs/QOS.md). The zero value polices.
type Egress struct {
	shape bool // the kernel shapes egress bandwidth on ifb devices
}

// ProbeEgress decides, once, how endpoints' egress bandwidth is enforced.
func ProbeEgress() Egress {
	e := Egress{shape: dataplane.EgressShapingSupported()}
	if !e.shape {
		slog.Warn("the kernel cannot redirect to ifb devices (no BPF_PROG_TYPE_SCHED_CLS): workload egress bandwidth is policed by iptables hashlimit, not shaped")
	}
	return e
}

// Policed says iptables rules police egress bandwidth (calc renders them).
func (e Egress) Policed() bool { return !e.shape }

// Shaping is the ifb tbf for an endpoint's qosControls, when the kernel
// shapes egress.
func (e Egress) Shaping(q *api.QoSControls) *dataplane.TokenBucket {
	if !e.shape {
		return nil
	}
	return dataplane.EgressShaping(q)
}
