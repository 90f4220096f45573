package felix

import (
	"log/slog"

	"github.com/calico-aio/calico-aio/felix/rules"
)

// readKubeIPVS tells the calculation whether kube-proxy's kube-ipvs0
// interface exists, which turns kube-proxy IPVS mode on (felix/rules/ipvs.go)
// as in Calico. Calico's Felix looks at start-up and restarts itself when
// the interface comes or goes; this agent looks before every apply, and
// the interface watch (ifacewatch.go) makes the interface's coming and
// going trigger one. It reports whether the mode is on: the this-host IP
// set then needs the host's addresses.
func (a *agent) readKubeIPVS() bool {
	on, err := a.dp.LinkExists(rules.KubeIPVSInterface)
	if err != nil {
		slog.Warn("checking for kube-proxy's IPVS interface; keeping the last answer", "interface", rules.KubeIPVSInterface, "err", err)
		return a.state.KubeIPVS()
	}
	mask := uint32(0)
	if m := a.settings.Current().IptablesMarkMask; m != nil {
		mask = *m
	}
	if on != a.state.KubeIPVS() {
		slog.Info("kube-proxy IPVS mode", "on", on, "interface", rules.KubeIPVSInterface, "marks", rules.IPVSMarks(mask))
	}
	if on && rules.EndpointMarkField(mask) == 0 {
		// Calico's Felix panics at start-up here; the agent keeps running
		// without the IPVS rules.
		slog.Error("kube-proxy IPVS mode needs iptablesMarkMask bits above its lowest 5 for the endpoint mark; IPVS rules not rendered",
			"iptablesMarkMask", mask)
	}
	a.state.SetKubeIPVS(on)
	return on
}
