package felix

import (
	"time"

	"github.com/calico-aio/calico-aio/cni"
)

// maxApplyHold bounds how long a due apply waits for the CNI calls in
// flight: a pod's ADD or DEL served by the agent runs faster without the
// apply competing for the node's cores (at 250 pods an apply costs more
// CPU than the call), and the apply after it programs the call's block,
// interface and endpoint at once instead of in up to three applies. A
// steady stream of calls delays policy by at most this much.
const maxApplyHold = 50 * time.Millisecond

// applyHold is the loop's hold of one due apply: idle is closed when no
// call is in flight any more, timer fires when the hold has lasted
// maxApplyHold.
type applyHold struct {
	since time.Time // when the due apply was first held; zero: not held
	idle  <-chan struct{}
	timer *time.Timer
}

func newApplyHold() *applyHold {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &applyHold{timer: t}
}

// wait reports whether the due apply should wait (the loop then selects
// on idle and timer); false: apply now.
func (h *applyHold) wait(busy *cni.Busy, now time.Time) bool {
	idle := busy.Idle()
	if idle != nil && h.since.IsZero() {
		h.since = now
	}
	left := maxApplyHold - now.Sub(h.since)
	if idle == nil || left <= 0 {
		h.since, h.idle = time.Time{}, nil
		h.timer.Stop()
		return false
	}
	h.idle = idle
	h.timer.Reset(left)
	return true
}
