package calc

import "strings"

// FilterDeny is FelixConfiguration iptablesFilterDenyAction for the
// overlay's filter rules (the drop of VXLAN and IP-in-IP from hosts that
// are not Calico nodes), which Calico denies with it as it does policy.
type FilterDeny struct{ Reject bool }

// Target is the iptables target: DROP, or REJECT.
func (d FilterDeny) Target() string {
	if d.Reject {
		return "-j REJECT"
	}
	return "-j DROP"
}

// Word is the verdict in rule comments, as Calico writes it.
func (d FilterDeny) Word() string {
	if d.Reject {
		return "Reject"
	}
	return "Drop"
}

// filterDeny reads iptablesFilterDenyAction: "default" overlaid by
// "node.<name>".
func (o *Overlay) filterDeny() FilterDeny {
	var d FilterDeny
	for _, name := range []string{"default", "node." + o.node} {
		if f, ok := o.felixCfgs[name]; ok && f.Spec.IptablesFilterDenyAction != "" {
			d.Reject = strings.EqualFold(f.Spec.IptablesFilterDenyAction, "Reject")
		}
	}
	return d
}
