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
