package hostiface

import (
	"log/slog"

	"github.com/calico-aio/calico-aio/felix/calc"
	"github.com/calico-aio/calico-aio/felix/dataplane"
	"github.com/calico-aio/calico-aio/felix/rules"
)

// KubeIPVS tells the calculation (st) whether kube-proxy's kube-ipvs0
// interface exists (dp looks; markMask is iptablesMarkMask), which turns kube-proxy IPVS mode on (felix/rules/ipvs.go)
// as in Calico. Calico's Felix looks at start-up and restarts itself when
// the interface comes or goes; this agent looks before the first apply
// and whenever the interface watch w saw kube-ipvs0 come or go (or its
// subscription restarted, or the periodic interface refresh asked), and
// the watch makes that event trigger an apply. Without a watch (nil) it
// looks before every apply. It reports whether the mode is on: the
// this-host IP set then needs the host's addresses.
func KubeIPVS(w *Watch, dp *dataplane.Dataplane, st *calc.State, markMask *uint32) bool {
	if w != nil && !w.ipvsUnknown.Swap(false) {
		return st.KubeIPVS()
	}
	on, err := dp.LinkExists(rules.KubeIPVSInterface)
	if err != nil {
		if w != nil {
			w.RecheckIPVS()
		}
		slog.Warn("checking for kube-proxy's IPVS interface; keeping the last answer", "interface", rules.KubeIPVSInterface, "err", err)
		return st.KubeIPVS()
	}
	mask := uint32(0)
	if markMask != nil {
		mask = *markMask
	}
	if on != st.KubeIPVS() {
		slog.Info("kube-proxy IPVS mode", "on", on, "interface", rules.KubeIPVSInterface, "marks", rules.IPVSMarks(mask))
	}
	if on && rules.EndpointMarkField(mask) == 0 {
		// Calico's Felix panics at start-up here; the agent keeps running
		// without the IPVS rules.
		slog.Error("kube-proxy IPVS mode needs iptablesMarkMask bits above its lowest 5 for the endpoint mark; IPVS rules not rendered",
			"iptablesMarkMask", mask)
	}
	st.SetKubeIPVS(on)
	return on
}
