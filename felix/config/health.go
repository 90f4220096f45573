package config

import (
	"fmt"
	"strings"
	"time"

	"github.com/calico-aio/calico-aio/store/api"
)

// healthTimeoutOverrides (felix/health/overrides.go) as a setting.

// ParseHealthOverrides reads FELIX_HEALTHTIMEOUTOVERRIDES: name=duration
// pairs joined by commas ("InternalDataplaneMainLoop=120s,CalculationGraph=30s").
func ParseHealthOverrides(s string) (*[]api.HealthTimeoutOverride, error) {
	var out []api.HealthTimeoutOverride
	for _, kv := range strings.Split(s, ",") {
		name, v, found := strings.Cut(strings.TrimSpace(kv), "=")
		d, err := time.ParseDuration(strings.TrimSpace(v))
		name = strings.TrimSpace(name)
		if !found || err != nil || d < 0 || !api.HealthReporterRE().MatchString(name) {
			return nil, fmt.Errorf("%q must be name=duration pairs joined by commas (a duration such as 90s, not negative)", kv)
		}
		out = append(out, api.HealthTimeoutOverride{Name: name, Timeout: api.Duration{Duration: d}})
	}
	return &out, nil
}

func ValidHealthOverrides(os *[]api.HealthTimeoutOverride) error {
	for _, o := range *os {
		if !api.HealthReporterRE().MatchString(o.Name) || o.Timeout.Duration < 0 {
			return fmt.Errorf("%s=%s: the name must be letters, digits, '_', '.', '-' and the timeout not negative", o.Name, o.Timeout)
		}
	}
	return nil
}
