package health

import (
	"log/slog"
	"strings"
	"time"

	"github.com/calico-aio/calico-aio/store/api"
)

// healthTimeoutOverrides, as in Calico, set the liveness timeout of
// health reporters by name; 0 means the reporter never times out. This
// agent has one reporter that can time out: its loop, which does what
// Calico's InternalDataplaneMainLoop (the dataplane driver) and
// CalculationGraph (the calculation) do, so both names apply to it and
// the smallest wins. A name this agent has no reporter for is accepted
// (as Calico accepts it) and logged once.
var loopReporters = []string{"InternalDataplaneMainLoop", "CalculationGraph"}

// loopTimeout is the loop's timeout under overrides: ok false when no override
// names it; 0 for no timeout. unknown are the names with no reporter.
func loopTimeout(overrides *[]api.HealthTimeoutOverride) (d time.Duration, ok bool, unknown []string) {
	if overrides == nil {
		return 0, false, nil
	}
	for _, o := range *overrides {
		known := false
		for _, r := range loopReporters {
			known = known || strings.EqualFold(o.Name, r)
		}
		if !known {
			unknown = append(unknown, o.Name)
			continue
		}
		if !ok || o.Timeout.Duration > 0 && (d == 0 || o.Timeout.Duration < d) {
			d = o.Timeout.Duration
		}
		ok = true
	}
	return d, ok, unknown
}

// SetOverrides applies healthTimeoutOverrides to the loop's liveness.
// It runs on the loop's goroutine.
func (h *Health) SetOverrides(overrides *[]api.HealthTimeoutOverride) {
	d, ok, unknown := loopTimeout(overrides)
	switch {
	case !ok:
		h.override.Store(0)
	case d == 0:
		h.override.Store(-1)
	default:
		h.override.Store(int64(d))
	}
	for _, n := range unknown {
		if h.unknownLogged == nil {
			h.unknownLogged = map[string]bool{}
		}
		if !h.unknownLogged[n] {
			h.unknownLogged[n] = true
			slog.Warn("healthTimeoutOverrides: this agent has no health reporter of that name; the override has no effect (the agent's loop answers to InternalDataplaneMainLoop and CalculationGraph)", "name", n)
		}
	}
}
