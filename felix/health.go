package felix

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// health tracks liveness (the loop keeps turning) and readiness (in sync
// with the datastore and the dataplane programmed).
type health struct {
	lastLoop atomic.Int64 // unix nanos of the loop's last turn
	ready    atomic.Bool
	maxGap   time.Duration
}

func (h *health) beat()            { h.lastLoop.Store(time.Now().UnixNano()) }
func (h *health) setReady(ok bool) { h.ready.Store(ok) }

func (h *health) live() bool {
	return time.Since(time.Unix(0, h.lastLoop.Load())) < h.maxGap
}

func (h *health) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/liveness", func(w http.ResponseWriter, _ *http.Request) {
		if !h.live() {
			http.Error(w, "calculation loop stalled", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("/readiness", func(w http.ResponseWriter, _ *http.Request) {
		if !h.ready.Load() || !h.live() {
			http.Error(w, "not in sync or not yet programmed", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	return mux
}

// metrics are the agent's Prometheus series.
type metrics struct {
	reg            *prometheus.Registry
	applySeconds   prometheus.Histogram
	resyncs        prometheus.Counter
	applyErrors    prometheus.Counter
	localEndpoints prometheus.Gauge
	activePolicies prometheus.Gauge
	ipsets         prometheus.Gauge
	updates        prometheus.Counter
}

func newMetrics() *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		applySeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "felix_int_dataplane_apply_time_seconds",
			Help: "Time to apply a batch of changes to the dataplane.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)}),
		resyncs:        prometheus.NewCounter(prometheus.CounterOpts{Name: "felix_resyncs_started", Help: "Full kernel resyncs started."}),
		applyErrors:    prometheus.NewCounter(prometheus.CounterOpts{Name: "felix_int_dataplane_failures", Help: "Dataplane applies that failed."}),
		localEndpoints: prometheus.NewGauge(prometheus.GaugeOpts{Name: "felix_active_local_endpoints", Help: "Local workload endpoints."}),
		activePolicies: prometheus.NewGauge(prometheus.GaugeOpts{Name: "felix_active_local_policies", Help: "Policies applied to local endpoints."}),
		ipsets:         prometheus.NewGauge(prometheus.GaugeOpts{Name: "felix_ipsets_calico", Help: "Calico IP sets programmed."}),
		updates:        prometheus.NewCounter(prometheus.CounterOpts{Name: "felix_calc_graph_updates_processed", Help: "Datastore updates processed."}),
	}
	m.reg.MustRegister(m.applySeconds, m.resyncs, m.applyErrors, m.localEndpoints, m.activePolicies, m.ipsets, m.updates,
		prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
	return m
}

// serve runs an HTTP server on addr until ctx ends ("" disables it).
func serve(ctx context.Context, addr string, h http.Handler, name string) error {
	if addr == "" {
		return nil
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			slog.Error("server stopped", "server", name, "err", err)
		}
	}()
	slog.Info("serving", "server", name, "addr", l.Addr().String())
	return nil
}

func metricsHandler(m *metrics) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{}))
	return mux
}
