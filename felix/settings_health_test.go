package felix

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/calico-aio/calico-aio/felix/calc"
	"github.com/calico-aio/calico-aio/felix/config"
	"github.com/calico-aio/calico-aio/felix/health"
	"github.com/calico-aio/calico-aio/felix/metrics"
)

// TestHealthTimeoutOverridesLive: /liveness of an agent whose loop last
// turned 30 s ago answers 200 under the default timeout; an override of
// InternalDataplaneMainLoop (or CalculationGraph: the same loop) shorter
// than that makes it 503 at once, 0 removes the timeout, removing the
// override restores the default, and a name this agent has no reporter
// for changes nothing. FELIX_HEALTHTIMEOUTOVERRIDES wins over the
// datastore.
func TestHealthTimeoutOverridesLive(t *testing.T) {
	newA := func(env spec) *agent {
		a := &agent{cfg: config.Config{NodeName: "n1"}, state: calc.NewState("n1"), overlay: calc.NewOverlay("n1"),
			health: health.New(time.Minute), metrics: metrics.New("n1", ""), settings: config.NewLoader("n1", env)}
		a.foldSettings()
		return a
	}
	code := func(a *agent, lastTurn time.Duration) int {
		a.health.BeatAt(time.Now().Add(-lastTurn))
		rec := httptest.NewRecorder()
		a.health.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/liveness", nil))
		return rec.Code
	}
	a := newA(spec{})
	for _, step := range []struct {
		overrides string // JSON, "" to delete the object
		lastTurn  time.Duration
		want      int
	}{
		{"", 30 * time.Second, 200},
		{"", 2 * time.Minute, 503},
		{`[{"name":"InternalDataplaneMainLoop","timeout":"10s"}]`, 30 * time.Second, 503},
		{`[{"name":"InternalDataplaneMainLoop","timeout":"10s"}]`, 5 * time.Second, 200},
		{`[{"name":"InternalDataplaneMainLoop","timeout":"5m"}]`, 2 * time.Minute, 200},
		{`[{"name":"InternalDataplaneMainLoop","timeout":"0s"}]`, time.Hour, 200},
		{`[{"name":"InternalDataplaneMainLoop","timeout":"0s"},{"name":"CalculationGraph","timeout":"20s"}]`, 30 * time.Second, 503},
		{`[{"name":"CalculationGraph","timeout":"5m"},{"name":"InternalDataplaneMainLoop","timeout":"10m"}]`, 4 * time.Minute, 200},
		{`[{"name":"NoSuchReporter","timeout":"1s"}]`, 30 * time.Second, 200},
		{"", 2 * time.Minute, 503},
	} {
		if step.overrides == "" {
			a.fold(felixUpdate(fc(t, "default", "healthTimeoutOverrides", `[]`), true))
		} else {
			a.fold(felixUpdate(fc(t, "default", "healthTimeoutOverrides", step.overrides), false))
		}
		if got := code(a, step.lastTurn); got != step.want {
			t.Errorf("overrides %s, loop last turned %s ago: /liveness %d, want %d", step.overrides, step.lastTurn, got, step.want)
		}
	}

	env, err := config.ParseFelixEnv([]string{"FELIX_HEALTHTIMEOUTOVERRIDES=InternalDataplaneMainLoop=10s, CalculationGraph=1h"})
	if err != nil {
		t.Fatal(err)
	}
	a = newA(env)
	a.fold(felixUpdate(fc(t, "default", "healthTimeoutOverrides", `[{"name":"InternalDataplaneMainLoop","timeout":"1h"}]`), false))
	if got := code(a, 30*time.Second); got != 503 {
		t.Errorf("FELIX_HEALTHTIMEOUTOVERRIDES 10s over the datastore's 1h: /liveness %d, want 503", got)
	}
	for _, bad := range []string{"InternalDataplaneMainLoop", "x=-1s", "%=1s", "a=1s,,b=2s", "a=90"} {
		if _, err := config.ParseFelixEnv([]string{"FELIX_HEALTHTIMEOUTOVERRIDES=" + bad}); err == nil {
			t.Errorf("FELIX_HEALTHTIMEOUTOVERRIDES=%s accepted", bad)
		}
	}
}
