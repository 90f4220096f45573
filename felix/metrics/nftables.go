package metrics

import (
	"log/slog"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// nftablesMode: Calico's default Auto runs Calico's nftables dataplane
// when kube-proxy runs in nftables mode and iptables otherwise; Enabled is
// refused at write (this agent has no nftables dataplane). Under Auto the
// agent programs iptables whatever it finds, and when it finds
// kube-proxy's nftables tables it says so: a warning when the mode appears
// (and a note when it goes), and the gauge calico_kube_proxy_nftables_mode.
// Disabled looks for nothing, as Calico's.

// nftCheckEvery bounds how often the loop looks (it looks on applies).
const nftCheckEvery = 5 * time.Second

type nftablesWatch struct {
	gauge    prometheus.Gauge
	last     time.Time
	detected bool
}

func newNFTablesWatch() *nftablesWatch {
	return &nftablesWatch{gauge: prometheus.NewGauge(prometheus.GaugeOpts{Name: "calico_kube_proxy_nftables_mode",
		Help: "1 when kube-proxy runs in nftables mode under nftablesMode Auto: Calico would run its nftables dataplane, this agent programs iptables."})}
}

// check looks for kube-proxy's nftables mode under mode (nftablesMode; ""
// is Auto) with detect, at most every nftCheckEvery; it logs a change and
// returns whether it did.
func (w *nftablesWatch) check(mode string, now time.Time, detect func() (bool, error)) (logged bool) {
	if strings.EqualFold(mode, "Disabled") {
		w.detected, w.last = false, time.Time{}
		w.gauge.Set(0)
		return false
	}
	if !w.last.IsZero() && now.Sub(w.last) < nftCheckEvery {
		return false
	}
	w.last = now
	found, err := detect()
	if err != nil {
		slog.Debug("looking for kube-proxy's nftables tables", "err", err)
		return false
	}
	if found == w.detected {
		return false
	}
	w.detected = found
	if found {
		w.gauge.Set(1)
		slog.Warn("kube-proxy runs in nftables mode (nftables table ip/ip6 kube-proxy): with nftablesMode Auto Calico would run its nftables dataplane; this agent has none and keeps programming iptables (docs/CONFIGURATION.md)")
	} else {
		w.gauge.Set(0)
		slog.Info("kube-proxy's nftables tables are gone; nftablesMode Auto: iptables, as Calico")
	}
	return true
}

// CheckNFTables looks for kube-proxy's nftables mode under mode
// (nftablesMode) with detect, at most every 5 s, and reports a change
// (a log line and calico_kube_proxy_nftables_mode).
func (m *Metrics) CheckNFTables(mode string, now time.Time, detect func() (bool, error)) {
	m.nft.check(mode, now, detect)
}
