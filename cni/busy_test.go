package cni

import (
	"testing"
	"time"
)

// TestBusy: Idle is nil with no call in flight, and a channel that closes
// when the last of the calls in flight ends.
func TestBusy(t *testing.T) {
	var b Busy
	if b.Idle() != nil {
		t.Fatal("idle channel with no call in flight")
	}
	exit1 := b.Enter()
	exit2 := b.Enter()
	ch := b.Idle()
	if ch == nil {
		t.Fatal("no idle channel with two calls in flight")
	}
	exit1()
	select {
	case <-ch:
		t.Fatal("idle with one call still in flight")
	default:
	}
	exit2()
	select {
	case <-ch:
	default:
		t.Fatal("not idle once both calls ended")
	}
	if b.Idle() != nil {
		t.Fatal("idle channel after the calls ended")
	}
	var none *Busy
	none.Enter()()
	if none.Idle() != nil {
		t.Fatal("a nil Busy is never busy")
	}
}

// TestWaitsForAgent: an ADD that waits for its policy or readiness gates
// does not hold the apply it waits for.
func TestWaitsForAgent(t *testing.T) {
	for conf, want := range map[string]bool{
		`{"type":"calico"}`: false,
		`{"type":"calico","policy_setup_timeout_seconds":0}`: false,
		`{"type":"calico","policy_setup_timeout_seconds":5}`: true,
		`{"type":"calico","readiness_gates":["http://x/"]}`:  true,
	} {
		if got := waitsForAgent([]byte(conf)); got != want {
			t.Errorf("%s: waitsForAgent %v, want %v", conf, got, want)
		}
	}
}

// TestBusyEnded: Ended is zero while a call is in flight and the time the
// last one ended after.
func TestBusyEnded(t *testing.T) {
	var b Busy
	exit := b.Enter()
	if !b.Ended().IsZero() {
		t.Fatal("an end time with a call in flight")
	}
	before := time.Now()
	exit()
	if e := b.Ended(); e.Before(before) || e.After(time.Now()) {
		t.Fatalf("Ended %v, want the moment the call ended (after %v)", e, before)
	}
}
