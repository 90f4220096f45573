// Package health owns calico-node's liveness and readiness: whether the
// agent's loop keeps turning (with healthTimeoutOverrides), whether it is
// in sync and programmed, the added readiness checks, and the HTTP handler
// serving /liveness and /readiness.
package health

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/calico-aio/calico-aio/store/embedded"
)

// Health tracks liveness (the loop keeps turning) and readiness (in sync
// with the datastore, the dataplane programmed, and every added check
// passing, such as the embedded etcd having no alarm).
type Health struct {
	lastLoop atomic.Int64 // unix nanos of the loop's last turn
	ready    atomic.Bool
	maxGap   time.Duration // the loop's liveness timeout by default
	// override is the loop's timeout from healthTimeoutOverrides
	// (overrides.go): 0 none, negative no timeout at all.
	override      atomic.Int64
	unknownLogged map[string]bool // override names without a reporter, logged

	mu     sync.Mutex
	checks []func() error // each returns why the agent is not ready, or nil
}

// AddCheck adds a readiness condition; its error is the reason served.
func (h *Health) AddCheck(check func() error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.checks = append(h.checks, check)
}

// notReady returns why the agent is not ready, or nil.
func (h *Health) notReady() error {
	if !h.ready.Load() || !h.live() {
		return errors.New("not in sync or not yet programmed")
	}
	h.mu.Lock()
	checks := h.checks
	h.mu.Unlock()
	for _, check := range checks {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

// New tracks an agent whose loop is live while it turns at least every
// maxGap (unless healthTimeoutOverrides say otherwise).
func New(maxGap time.Duration) *Health { return &Health{maxGap: maxGap} }

// Beat records a turn of the loop now.
func (h *Health) Beat() { h.BeatAt(time.Now()) }

// BeatAt records a turn of the loop at t.
func (h *Health) BeatAt(t time.Time) { h.lastLoop.Store(t.UnixNano()) }

// SetReady records whether the agent is in sync and programmed.
func (h *Health) SetReady(ok bool) { h.ready.Store(ok) }

func (h *Health) live() bool {
	gap := h.maxGap
	switch o := h.override.Load(); {
	case o < 0:
		return true
	case o > 0:
		gap = time.Duration(o)
	}
	return time.Since(time.Unix(0, h.lastLoop.Load())) < gap
}

// Handler serves /liveness and /readiness.
func (h *Health) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/liveness", func(w http.ResponseWriter, _ *http.Request) {
		if !h.live() {
			http.Error(w, "calculation loop stalled", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("/readiness", func(w http.ResponseWriter, _ *http.Request) {
		if err := h.notReady(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	return mux
}

// WatchEmbeddedEtcd makes the embedded member's alarms a readiness
// condition.
func (h *Health) WatchEmbeddedEtcd(s *embedded.Server) {
	h.AddCheck(func() error {
		if alarms := s.Alarms(); len(alarms) > 0 {
			return fmt.Errorf("embedded etcd alarm %s raised: datastore writes are refused (NOSPACE: database over its quota, see calico_embedded_etcd_* metrics)",
				strings.Join(alarms, ","))
		}
		return nil
	})
}
