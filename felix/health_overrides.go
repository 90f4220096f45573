package felix

import (
	"fmt"
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

// loopTimeout is the loop's timeout under s: ok false when no override
// names it; 0 for no timeout. unknown are the names with no reporter.
func loopTimeout(s *spec) (d time.Duration, ok bool, unknown []string) {
	if s.HealthTimeoutOverrides == nil {
		return 0, false, nil
	}
	for _, o := range *s.HealthTimeoutOverrides {
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

// setOverrides applies s's healthTimeoutOverrides to the loop's liveness.
// It runs on the loop's goroutine.
func (h *health) setOverrides(s *spec) {
	d, ok, unknown := loopTimeout(s)
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

// parseHealthOverrides reads FELIX_HEALTHTIMEOUTOVERRIDES: name=duration
// pairs joined by commas ("InternalDataplaneMainLoop=120s,CalculationGraph=30s").
func parseHealthOverrides(s string) (*[]api.HealthTimeoutOverride, error) {
	var out []api.HealthTimeoutOverride
	for _, kv := range strings.Split(s, ",") {
		name, v, found := strings.Cut(strings.TrimSpace(kv), "=")
		d, err := time.ParseDuration(strings.TrimSpace(v))
		name = strings.TrimSpace(name)
		if !found || err != nil || d < 0 || !api.HealthReporterRE.MatchString(name) {
			return nil, fmt.Errorf("%q must be name=duration pairs joined by commas (a duration such as 90s, not negative)", kv)
		}
		out = append(out, api.HealthTimeoutOverride{Name: name, Timeout: api.Duration{Duration: d}})
	}
	return &out, nil
}

func validHealthOverrides(os *[]api.HealthTimeoutOverride) error {
	for _, o := range *os {
		if !api.HealthReporterRE.MatchString(o.Name) || o.Timeout.Duration < 0 {
			return fmt.Errorf("%s=%s: the name must be letters, digits, '_', '.', '-' and the timeout not negative", o.Name, o.Timeout)
		}
	}
	return nil
}
