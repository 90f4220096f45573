package calc_test

import (
	"strings"
	"testing"

	"github.com/calico-aio/calico-aio/felix/calc"
	"github.com/calico-aio/calico-aio/store/api"
)

// logRules are the v4 filter rules of d whose target is LOG.
func logRules(d calc.Desired) []string {
	var out []string
	for _, c := range d.Tables[4].Filter {
		for _, r := range c.Rules {
			if strings.HasPrefix(r.Action, "-j LOG") {
				out = append(out, r.Match)
			}
		}
	}
	return out
}

// TestLogActionRateLimitRendered: the effective FelixConfiguration's
// logActionRateLimit and logActionRateLimitBurst (5 when unset, as
// Calico) reach every Log rule as a limit match; unset, none.
func TestLogActionRateLimitRendered(t *testing.T) {
	ds := datastore{}
	ds.put(t, wep("default", "a", thisNode, "calia", nil, []string{"10.64.0.1/32"}, "logged"))
	p := profile("logged", nil)
	p.Spec.Ingress = []api.Rule{{Action: api.ActionLog}, {Action: api.ActionAllow}}
	ds.put(t, p)
	for _, tc := range []struct {
		set  func(s *api.FelixConfigurationSpec)
		want string
	}{
		{func(s *api.FelixConfigurationSpec) {}, ""},
		{func(s *api.FelixConfigurationSpec) { s.LogActionRateLimit = "10/minute" }, "-m limit --limit 10/minute --limit-burst 5"},
		{func(s *api.FelixConfigurationSpec) {
			s.LogActionRateLimit, s.LogActionRateLimitBurst = "3/hour", new(int)
		}, "-m limit --limit 3/hour --limit-burst 0"},
		{func(s *api.FelixConfigurationSpec) { s.LogActionRateLimitBurst = new(int) }, ""},
	} {
		next := ds.clone()
		next.put(t, felixDefault(tc.set))
		got := logRules(fresh(t, next, 0).Desired(false))
		if len(got) != 1 || !strings.HasSuffix(got[0], tc.want) || tc.want == "" && strings.Contains(got[0], "limit") {
			t.Errorf("Log rules %q, want one ending %q", got, tc.want)
		}
	}
}
