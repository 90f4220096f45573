package felix

import (
	"testing"
	"time"

	"github.com/calico-aio/calico-aio/cni"
)

// TestApplyHold: a due apply waits while a CNI call is in flight, runs as
// soon as none is, and never waits longer than maxApplyHold in all.
func TestApplyHold(t *testing.T) {
	h := newApplyHold()
	busy := &cni.Busy{}
	now := time.Now()
	if h.wait(busy, now) {
		t.Fatal("held with no call in flight")
	}
	if h.wait(nil, now) {
		t.Fatal("held with no CNI server")
	}
	exit := busy.Enter()
	if !h.wait(busy, now) || h.idle == nil {
		t.Fatal("not held with a call in flight")
	}
	if !h.wait(busy, now.Add(maxApplyHold-time.Millisecond)) {
		t.Fatal("not held just under maxApplyHold")
	}
	if h.wait(busy, now.Add(maxApplyHold)) {
		t.Fatal("held beyond maxApplyHold")
	}
	// A new hold starts afresh, and ends when the call does.
	if !h.wait(busy, now.Add(time.Second)) {
		t.Fatal("the next due apply is not held")
	}
	idle := h.idle
	exit()
	select {
	case <-idle:
	case <-time.After(time.Second):
		t.Fatal("idle not signalled when the call ended")
	}
	if h.wait(busy, now.Add(time.Second+time.Millisecond)) {
		t.Fatal("held after the call ended")
	}
}

// TestApplyHoldEchoGrace: once the last call ends, a due apply still waits
// echoGrace for the call's own writes' watch updates, within the same
// maxApplyHold bound, and a busy that never served a call holds nothing.
func TestApplyHoldEchoGrace(t *testing.T) {
	h := newApplyHold()
	busy := &cni.Busy{}
	busy.Enter()()
	ended := busy.Ended()
	if ended.IsZero() {
		t.Fatal("no end time after a call")
	}
	if !h.wait(busy, ended) || h.idle != nil {
		t.Fatal("not held (on the timer alone) just after the call ended")
	}
	if !h.wait(busy, ended.Add(echoGrace-time.Millisecond)) {
		t.Fatal("not held within echoGrace of the call's end")
	}
	if h.wait(busy, ended.Add(echoGrace)) {
		t.Fatal("held beyond echoGrace")
	}
	// A hold that began while the call was in flight keeps its bound.
	exit := busy.Enter()
	if !h.wait(busy, time.Now()) {
		t.Fatal("not held with a call in flight")
	}
	exit()
	ended = busy.Ended()
	h.since = ended.Add(-maxApplyHold + time.Millisecond) // the hold began this long ago
	if h.wait(busy, ended.Add(time.Millisecond)) {
		t.Fatal("the echo grace extended the hold beyond maxApplyHold")
	}
	if (&cni.Busy{}).Ended() != (time.Time{}) || h.wait(&cni.Busy{}, time.Now()) {
		t.Fatal("held for a call that never was")
	}
}
