package felix

import (
	"log/slog"

	"github.com/calico-aio/calico-aio/felix/dataplane"
	"github.com/calico-aio/calico-aio/store/api"
)

// probeEgressShaping decides, once, how endpoints' egress bandwidth is
// enforced: shaped on an ifb device where the kernel can redirect to it,
// else policed by iptables rules (docs/QOS.md).
func (a *agent) probeEgressShaping() {
	a.shapeEgress = dataplane.EgressShapingSupported()
	a.state.SetEgressPolicing(!a.shapeEgress)
	if !a.shapeEgress {
		slog.Warn("the kernel cannot redirect to ifb devices (no BPF_PROG_TYPE_SCHED_CLS): workload egress bandwidth is policed by iptables hashlimit, not shaped")
	}
}

// egressShaping is the ifb tbf for an endpoint's qosControls, when the
// kernel shapes egress.
func (a *agent) egressShaping(q *api.QoSControls) *dataplane.TokenBucket {
	if !a.shapeEgress {
		return nil
	}
	return dataplane.EgressShaping(q)
}
