package api

import (
	"strings"
	"testing"
)

// TestFelixRulesFieldsValidation: the policy-rendering fields accept
// Calico's values and refuse others at write, naming the field.
func TestFelixRulesFieldsValidation(t *testing.T) {
	for _, tc := range []struct {
		spec, bad string // bad: the field the error must name ("" for none)
	}{
		{`"iptablesFilterDenyAction":"Reject"`, ""},
		{`"iptablesFilterDenyAction":"Deny"`, "spec.iptablesFilterDenyAction"},
		{`"disableConntrackInvalidCheck":true`, ""},
		{`"natOutgoingExclusions":"IPPoolsAndHostIPs"`, ""},
		{`"natOutgoingExclusions":"HostIPs"`, "spec.natOutgoingExclusions"},
		{`"iptablesNATOutgoingInterfaceFilter":"eth+"`, ""},
		{`"iptablesNATOutgoingInterfaceFilter":"bond0.100"`, ""},
		{`"iptablesNATOutgoingInterfaceFilter":"eth 0"`, "spec.iptablesNATOutgoingInterfaceFilter"},
		{`"iptablesNATOutgoingInterfaceFilter":"a-very-long-interface"`, "spec.iptablesNATOutgoingInterfaceFilter"},
		{`"workloadSourceSpoofing":"Any"`, ""},
		{`"workloadSourceSpoofing":"All"`, "spec.workloadSourceSpoofing"},
		{`"logPrefix":"node-1 drop: x/y_z"`, ""},
		{`"logPrefix":"quote\"d"`, "spec.logPrefix"},
		{`"logPrefix":"%t-%n"`, "spec.logPrefix"},
		{`"logPrefix":"` + strings.Repeat("x", MaxLogPrefix+1) + `"`, "spec.logPrefix"},
		{`"serviceLoopPrevention":"Disabled"`, ""},
		{`"logActionRateLimit":"10/second","logActionRateLimitBurst":0`, ""},
		{`"logActionRateLimit":"9999/day","logActionRateLimitBurst":9999`, ""},
		{`"logActionRateLimit":"0/second"`, "spec.logActionRateLimit"},
		{`"logActionRateLimit":"10000/second"`, "spec.logActionRateLimit"},
		{`"logActionRateLimit":"10/sec"`, "spec.logActionRateLimit"},
		{`"logActionRateLimitBurst":10000`, "spec.logActionRateLimitBurst"},
		{`"logActionRateLimitBurst":-1`, "spec.logActionRateLimitBurst"},
		// Health reporters' timeouts (felix/health/overrides.go).
		{`"healthTimeoutOverrides":[{"name":"InternalDataplaneMainLoop","timeout":"0s"},{"name":"Valid","timeout":"120s"}]`, ""},
		{`"healthTimeoutOverrides":[{"name":"%","timeout":"10s"}]`, "spec.healthTimeoutOverrides[0].name"},
		{`"healthTimeoutOverrides":[{"name":"","timeout":"10s"}]`, "spec.healthTimeoutOverrides[0].name"},
		{`"healthTimeoutOverrides":[{"name":"a","timeout":"1s"},{"name":"b","timeout":"-1s"}]`, "spec.healthTimeoutOverrides[1].timeout"},
		{`"serviceLoopPrevention":"Block"`, "spec.serviceLoopPrevention"},
	} {
		checkFelixSpec(t, tc.spec, tc.bad)
	}
}

// checkFelixSpec decodes spec (fields of a FelixConfiguration "default"
// spec) and validates it: with bad "" it must be accepted, otherwise
// refused with an error naming bad (followed by a space or colon, so
// "spec.x[1]" is not satisfied by "spec.x[10]"). It returns the accepted
// resource (nil when refused).
func checkFelixSpec(t *testing.T, spec, bad string) Resource {
	t.Helper()
	r, err := Decode([]byte(obj("FelixConfiguration", `"name":"default"`, spec)))
	if err != nil {
		t.Errorf("%s: decode: %v", spec, err)
		return nil
	}
	err = r.Validate()
	switch {
	case bad == "" && err != nil:
		t.Errorf("%s refused: %v", spec, err)
	case bad != "" && (err == nil || !strings.Contains(err.Error(), bad+" ") && !strings.Contains(err.Error(), bad+":")):
		t.Errorf("%s: error %v, want one naming %s", spec, err, bad)
	case bad == "":
		return r
	}
	return nil
}
