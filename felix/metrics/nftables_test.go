package metrics

import (
	"errors"
	"fmt"
	"os/exec"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/calico-aio/calico-aio/felix/dataplane"
	"github.com/calico-aio/calico-aio/internal/nstest"
)

// TestNFTablesModeAutoReported: under nftablesMode Auto (Calico's
// default, also when unset) the agent looks for kube-proxy's nftables
// mode at most every 5 s, and reports a change once (a log line and the
// gauge calico_kube_proxy_nftables_mode); Disabled looks for nothing.
// In a namespace with kube-proxy's "ip kube-proxy" table the real
// detection sets the gauge.
func TestNFTablesModeAutoReported(t *testing.T) {
	w := newNFTablesWatch()
	t0 := time.Now()
	calls := 0
	found := true
	var failed error
	detect := func() (bool, error) { calls++; return found, failed }
	for i, step := range []struct {
		mode       string
		at         time.Duration
		found      bool
		err        error
		wantCalls  int
		wantLogged bool
		wantGauge  float64
	}{
		{"", 0, true, nil, 1, true, 1},
		{"Auto", 2 * time.Second, true, nil, 1, false, 1}, // too soon to look again
		{"Auto", 6 * time.Second, true, nil, 2, false, 1}, // still there: nothing new to say
		{"auto", 12 * time.Second, false, nil, 3, true, 0},
		{"Auto", 18 * time.Second, true, errors.New("netlink"), 4, false, 0},
		{"Disabled", 30 * time.Second, true, nil, 4, false, 0},
		{"Auto", 31 * time.Second, true, nil, 5, true, 1},
		{"Disabled", 32 * time.Second, true, nil, 5, false, 0},
	} {
		found, failed = step.found, step.err
		logged := w.check(step.mode, t0.Add(step.at), detect)
		if calls != step.wantCalls || logged != step.wantLogged || nftGauge(w.gauge) != step.wantGauge {
			t.Errorf("step %d (%q at %s): looked %d times, logged %v, gauge %v; want %d, %v, %v",
				i, step.mode, step.at, calls, logged, nftGauge(w.gauge), step.wantCalls, step.wantLogged, step.wantGauge)
		}
	}

	nstest.NeedKernel(t, "nft")
	n := nstest.NewNS(t)
	m := New("n1", "")
	if err := n.Do(func(ns.NetNS) error {
		out, err := exec.Command("nft", "add", "table", "ip", "kube-proxy").CombinedOutput()
		if err != nil {
			return fmt.Errorf("nft: %w: %s", err, out)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := n.Do(func(ns.NetNS) error { m.nft.check("", time.Now(), dataplane.KubeProxyNFTables); return nil }); err != nil {
		t.Fatal(err)
	}
	if v := scrape(t, m)["calico_kube_proxy_nftables_mode"]; v == nil || v.GetMetric()[0].GetGauge().GetValue() != 1 {
		t.Errorf("kube-proxy's table in the namespace: calico_kube_proxy_nftables_mode %v, want 1", v)
	}
}

func nftGauge(g prometheus.Gauge) float64 {
	var m dto.Metric
	_ = g.Write(&m)
	return m.GetGauge().GetValue()
}
