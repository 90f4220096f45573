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

// echoGrace is how long after the last call in flight ends a due apply
// still waits: for the watch updates of the call's own last writes, and
// for the next call of a burst. An ADD writes its endpoint and a DEL its
// block just before it answers, and their updates reach the loop 0.2-1.3
// ms after the answer (measured with 10 and 30 pods); without waiting for
// them, each would make an apply of its own after the one that ran as the
// call ended (1.2-1.6 applies per call; 1.00 with it). Pods also start in
// bursts (a node scheduled several at once, a deployment scaled up), and
// the runtime's next ADD reaches the agent a few milliseconds after the
// last one answered: with 5 ms the apply for the first pods often started
// in that gap and the next ADD competed with it for the cores (at 250 pods
// an apply costs more CPU than the call). Interleaved at 250 pods, 15 ms
// against 5 ms: ADD p50 back to back 8.8 against 11.2 ms (0.93x against
// 1.18x ptp + host-local's), CPU per ADD 0.97x, a lone ADD's latency the
// same (docs/PERFORMANCE.md, tenth pass). maxApplyHold still bounds the
// whole wait.
const echoGrace = 15 * time.Millisecond

// applyHold is the loop's hold of one due apply: idle is closed when no
// call is in flight any more, timer fires when the hold has lasted
// maxApplyHold or the echo grace is over.
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
// on idle and timer); false: apply now. It waits while a call is in
// flight, and for echoGrace after the last one ended, at most
// maxApplyHold in all.
func (h *applyHold) wait(busy *cni.Busy, now time.Time) bool {
	idle := busy.Idle()
	grace := time.Duration(0)
	if ended := busy.Ended(); idle == nil && !ended.IsZero() {
		grace = ended.Add(echoGrace).Sub(now)
	}
	if idle == nil && grace <= 0 {
		h.stop()
		return false
	}
	if h.since.IsZero() {
		h.since = now
	}
	left := maxApplyHold - now.Sub(h.since)
	if left <= 0 {
		h.stop()
		return false
	}
	h.idle = idle
	if idle == nil {
		left = min(left, grace)
	}
	h.timer.Reset(left)
	return true
}

// stop ends the hold: the due apply runs now.
func (h *applyHold) stop() {
	h.since, h.idle = time.Time{}, nil
	h.timer.Stop()
}
