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
		{`"serviceLoopPrevention":"Block"`, "spec.serviceLoopPrevention"},
	} {
		r, err := Decode([]byte(obj("FelixConfiguration", `"name":"default"`, tc.spec)))
		if err != nil {
			t.Errorf("%s: decode: %v", tc.spec, err)
			continue
		}
		err = r.Validate()
		switch {
		case tc.bad == "" && err != nil:
			t.Errorf("%s refused: %v", tc.spec, err)
		case tc.bad != "" && (err == nil || !strings.Contains(err.Error(), tc.bad)):
			t.Errorf("%s: error %v, want one naming %s", tc.spec, err, tc.bad)
		}
	}
}
