package felix

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/calico-aio/calico-aio/felix/metrics"
	"github.com/calico-aio/calico-aio/store/embedded"
)

// health tracks liveness (the loop keeps turning) and readiness (in sync
// with the datastore, the dataplane programmed, and every added check
// passing, such as the embedded etcd having no alarm).
type health struct {
	lastLoop atomic.Int64 // unix nanos of the loop's last turn
	ready    atomic.Bool
	maxGap   time.Duration // the loop's liveness timeout by default
	// override is the loop's timeout from healthTimeoutOverrides
	// (health_overrides.go): 0 none, negative no timeout at all.
	override      atomic.Int64
	unknownLogged map[string]bool // override names without a reporter, logged

	mu     sync.Mutex
	checks []func() error // each returns why the agent is not ready, or nil
}

// addCheck adds a readiness condition; its error is the reason served.
func (h *health) addCheck(check func() error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.checks = append(h.checks, check)
}

// notReady returns why the agent is not ready, or nil.
func (h *health) notReady() error {
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

func (h *health) beat()            { h.lastLoop.Store(time.Now().UnixNano()) }
func (h *health) setReady(ok bool) { h.ready.Store(ok) }

func (h *health) live() bool {
	gap := h.maxGap
	switch o := h.override.Load(); {
	case o < 0:
		return true
	case o > 0:
		gap = time.Duration(o)
	}
	return time.Since(time.Unix(0, h.lastLoop.Load())) < gap
}

func (h *health) handler() http.Handler {
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

// watchEmbeddedEtcd makes the embedded member's alarms a readiness condition
// and its storage a set of metrics.
func watchEmbeddedEtcd(h *health, m *metrics.Metrics, s *embedded.Server) {
	h.addCheck(func() error {
		if alarms := s.Alarms(); len(alarms) > 0 {
			return fmt.Errorf("embedded etcd alarm %s raised: datastore writes are refused (NOSPACE: database over its quota, see calico_embedded_etcd_* metrics)",
				strings.Join(alarms, ","))
		}
		return nil
	})
	m.AddEmbeddedEtcd(s)
}
