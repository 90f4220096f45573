package felix

import (
	"testing"

	"github.com/calico-aio/calico-aio/felix/calc"
	"github.com/calico-aio/calico-aio/felix/config"
	"github.com/calico-aio/calico-aio/felix/metrics"
	"github.com/calico-aio/calico-aio/store/api"
)

// TestSettingsRuntimeMetricsLive: /metrics serves the Go runtime's go_*
// and the process's process_* series by default (Calico's true), and
// prometheusGoMetricsEnabled / prometheusProcessMetricsEnabled take each
// away and bring it back while the agent runs; FELIX_ variables win.
func TestSettingsRuntimeMetricsLive(t *testing.T) {
	newA := func(env spec) *agent {
		a := &agent{cfg: config.Config{NodeName: "n1"}, state: calc.NewState("n1"), overlay: calc.NewOverlay("n1"),
			metrics: metrics.New("n1", ""), settings: config.NewLoader("n1", env)}
		a.foldSettings()
		return a
	}
	want := func(a *agent, goOn, procOn bool) {
		t.Helper()
		s := scrape(t, a.metrics)
		if _, got := s["go_goroutines"]; got != goOn {
			t.Errorf("go_goroutines served %v, want %v", got, goOn)
		}
		if _, got := s["process_cpu_seconds_total"]; got != procOn {
			t.Errorf("process_cpu_seconds_total served %v, want %v", got, procOn)
		}
		if _, ok := s["felix_resyncs_started"]; !ok {
			t.Error("felix_resyncs_started no longer served")
		}
	}
	a := newA(spec{})
	want(a, true, true)
	f := fc(t, "default", "prometheusGoMetricsEnabled", `false`)
	a.fold(felixUpdate(f, false))
	want(a, false, true)
	f.Spec.PrometheusProcessMetricsEnabled = ptr(false)
	a.fold(felixUpdate(f, false))
	want(a, false, false)
	a.fold(felixUpdate(fc(t, "node.n1", "prometheusGoMetricsEnabled", `true`), false))
	want(a, true, false)
	a.fold(felixUpdate(f, true))
	a.fold(felixUpdate(fc(t, "node.n1", "prometheusGoMetricsEnabled", `true`), true))
	want(a, true, true)

	env, err := config.ParseFelixEnv([]string{"FELIX_PROMETHEUSPROCESSMETRICSENABLED=false"})
	if err != nil {
		t.Fatal(err)
	}
	a = newA(env)
	a.fold(felixUpdate(fc(t, "default", "prometheusProcessMetricsEnabled", `true`), false))
	want(a, true, false)
	if _, err := config.ParseFelixEnv([]string{"FELIX_PROMETHEUSGOMETRICSENABLED=maybe"}); err == nil {
		t.Error("FELIX_PROMETHEUSGOMETRICSENABLED=maybe accepted")
	}
	_ = api.APIVersion
}
