package cni

import (
	"encoding/json"
	"sync"
	"time"
)

// Busy counts the calls an Agent is serving, so that calico-node can hold
// its dataplane apply while a pod's ADD or DEL is in flight: the apply of
// a node with many pods takes CPU the call needs (both run on the node's
// few cores), and the call itself writes what the apply would otherwise
// program twice (its block, its interface, its endpoint). The holder
// bounds the hold; see felix's loop. The zero value is ready to use.
type Busy struct {
	mu   sync.Mutex
	n    int
	idle chan struct{} // closed when n drops to 0; nil while n is 0
	// ended is when n last dropped to 0 (zero: never).
	ended time.Time
}

// Idle returns nil when no call is in flight, else a channel closed once
// none is.
func (b *Busy) Idle() <-chan struct{} {
	if b == nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.n == 0 {
		return nil
	}
	return b.idle
}

// Ended is when the last call in flight ended (zero: none has, or a call
// is in flight now).
func (b *Busy) Ended() time.Time {
	if b == nil {
		return time.Time{}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.n > 0 {
		return time.Time{}
	}
	return b.ended
}

// Enter counts one call until the returned func is called (Serve does).
func (b *Busy) Enter() func() {
	if b == nil {
		return func() {}
	}
	b.mu.Lock()
	if b.n == 0 {
		b.idle = make(chan struct{})
	}
	b.n++
	b.mu.Unlock()
	return func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.n--; b.n == 0 {
			close(b.idle)
			b.idle = nil
			b.ended = time.Now()
		}
	}
}

// waitsForAgent: the netconf makes ADD wait for the agent (its policy
// programmed, policy_setup_timeout_seconds) or for anything long
// (readiness_gates); such a call must not hold the apply it waits for.
func waitsForAgent(stdin []byte) bool {
	var c struct {
		Policy int               `json:"policy_setup_timeout_seconds"`
		Gates  []json.RawMessage `json:"readiness_gates"`
	}
	_ = json.Unmarshal(stdin, &c)
	return c.Policy > 0 || len(c.Gates) > 0
}
