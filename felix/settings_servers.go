package felix

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"time"
)

// The health and metrics servers listen where the effective configuration
// says (healthEnabled/healthHost/healthPort, prometheusMetricsEnabled/
// prometheusMetricsHost/prometheusMetricsPort); a change moves the
// listener while the agent runs. --health-addr and --metrics-addr
// (FELIX_HEALTHADDR, FELIX_METRICSADDR), when given, win over all of it.

// Defaults: Calico's hosts and ports. Both servers are on unless turned
// off (Calico's own default is off; its manifests turn health on, and
// this agent has always served both).
const (
	defaultHealthHost  = "localhost"
	defaultHealthPort  = 9099
	defaultMetricsPort = 9091
)

// healthAddr is where the health server listens under s ("" = off).
func healthAddr(s *spec) string {
	if s.HealthEnabled != nil && !*s.HealthEnabled {
		return ""
	}
	host, port := defaultHealthHost, defaultHealthPort
	if s.HealthHost != nil {
		host = *s.HealthHost
	}
	if s.HealthPort != nil {
		port = *s.HealthPort
	}
	return net.JoinHostPort(host, strconv.Itoa(port))
}

// metricsAddr is where the metrics server listens under s ("" = off).
func metricsAddr(s *spec) string {
	if s.PrometheusMetricsEnabled != nil && !*s.PrometheusMetricsEnabled {
		return ""
	}
	port := defaultMetricsPort
	if s.PrometheusMetricsPort != nil {
		port = *s.PrometheusMetricsPort
	}
	return net.JoinHostPort(s.PrometheusMetricsHost, strconv.Itoa(port))
}

// serverSlot is one HTTP server whose address can change.
type serverSlot struct {
	name    string
	handler http.Handler
	addr    string
	srv     *http.Server
}

// set makes the server listen on addr ("" stops it). The old listener is
// closed before the new one opens, so a move to another host on the same
// port works.
func (s *serverSlot) set(addr string) error {
	if s.srv != nil && addr == s.addr {
		return nil
	}
	if s.srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_ = s.srv.Shutdown(ctx)
		cancel()
		s.srv = nil
		slog.Info("stopped serving", "server", s.name, "addr", s.addr)
	}
	s.addr = addr
	if addr == "" {
		return nil
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("%s server on %s: %w", s.name, addr, err)
	}
	srv := &http.Server{Handler: s.handler, ReadHeaderTimeout: 5 * time.Second}
	s.srv = srv
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			slog.Error("server stopped", "server", s.name, "err", err)
		}
	}()
	slog.Info("serving", "server", s.name, "addr", l.Addr().String())
	return nil
}

// close stops the server.
func (s *serverSlot) close() { _ = s.set("") }
