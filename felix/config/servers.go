package config

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"
)

// The health and metrics servers listen where the effective configuration
// says (healthEnabled/healthHost/healthPort, prometheusMetricsEnabled/
// prometheusMetricsHost/prometheusMetricsPort); a change moves the
// listener while the agent runs. prometheusMetricsCertFile/KeyFile/CAFile
// make the metrics server HTTPS (TLSFiles below), also live. --health-addr and --metrics-addr
// (FELIX_HEALTHADDR, FELIX_METRICSADDR), when given, win over all of it.

// Defaults: Calico's hosts and ports. Both servers are on unless turned
// off (Calico's own default is off; its manifests turn health on, and
// this agent has always served both).
const (
	defaultHealthHost  = "localhost"
	defaultHealthPort  = 9099
	defaultMetricsPort = 9091
)

// HealthAddr is where the health server listens under s ("" = off).
func HealthAddr(s *spec) string {
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

// MetricsAddr is where the metrics server listens under s ("" = off).
func MetricsAddr(s *spec) string {
	if s.PrometheusMetricsEnabled != nil && !*s.PrometheusMetricsEnabled {
		return ""
	}
	port := defaultMetricsPort
	if s.PrometheusMetricsPort != nil {
		port = *s.PrometheusMetricsPort
	}
	return net.JoinHostPort(s.PrometheusMetricsHost, strconv.Itoa(port))
}

// TLSFiles are the PEM files a server serves HTTPS with. As in Calico
// (libcalico-go security.ServePrometheusMetrics) TLS needs all three, and
// then only clients with a certificate from the CA are served; none set
// is plain HTTP. Each FelixConfiguration is refused at write unless it
// sets all three or none; a partial set can still arise by mixing
// FELIX_ variables with the datastore, and then the server stays off
// (Calico would fall back to HTTP) rather than serve in the clear.
type TLSFiles struct{ cert, key, ca string }

// MetricsTLS is the TLS of the metrics server under s.
func MetricsTLS(s *spec) TLSFiles {
	return TLSFiles{cert: s.PrometheusMetricsCertFile, key: s.PrometheusMetricsKeyFile, ca: s.PrometheusMetricsCAFile}
}

// config loads the files (nil, nil: plain HTTP).
func (f TLSFiles) config() (*tls.Config, error) {
	if f == (TLSFiles{}) {
		return nil, nil
	}
	if f.cert == "" || f.key == "" || f.ca == "" {
		return nil, fmt.Errorf("prometheusMetricsCertFile %q, prometheusMetricsKeyFile %q and prometheusMetricsCAFile %q must be set together", f.cert, f.key, f.ca)
	}
	cert, err := tls.LoadX509KeyPair(f.cert, f.key)
	if err != nil {
		return nil, fmt.Errorf("prometheusMetricsCertFile %s, prometheusMetricsKeyFile %s: %w", f.cert, f.key, err)
	}
	pem, err := os.ReadFile(f.ca)
	if err != nil {
		return nil, fmt.Errorf("prometheusMetricsCAFile: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("prometheusMetricsCAFile %s: no PEM certificate in it", f.ca)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, ClientAuth: tls.RequireAndVerifyClientCert,
		ClientCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

// Server is one HTTP server whose address and TLS can change.
type Server struct {
	Name    string
	Handler http.Handler
	addr    string
	files   TLSFiles
	srv     *http.Server
}

// Set makes the server listen on addr ("" stops it), over TLS when files
// say so. The old listener is closed before the new one opens, so a move
// to another host on the same port works. Files are read here: a change
// of their content is picked up when the settings change (or at restart,
// as in Calico).
func (s *Server) Set(addr string, files TLSFiles) error {
	if s.srv != nil && addr == s.addr && files == s.files {
		return nil
	}
	if s.srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_ = s.srv.Shutdown(ctx)
		cancel()
		s.srv = nil
		slog.Info("stopped serving", "server", s.Name, "addr", s.addr)
	}
	s.addr, s.files = addr, files
	if addr == "" {
		return nil
	}
	cfg, err := files.config()
	if err != nil {
		return fmt.Errorf("%s server on %s: %w", s.Name, addr, err)
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("%s server on %s: %w", s.Name, addr, err)
	}
	srv := &http.Server{Handler: s.Handler, ReadHeaderTimeout: 5 * time.Second, TLSConfig: cfg}
	s.srv = srv
	go func() {
		serve := srv.Serve
		if cfg != nil {
			serve = func(l net.Listener) error { return srv.ServeTLS(l, "", "") }
		}
		if err := serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			slog.Error("server stopped", "server", s.Name, "err", err)
		}
	}()
	slog.Info("serving", "server", s.Name, "addr", l.Addr().String(), "tls", cfg != nil)
	return nil
}

// Close stops the server.
func (s *Server) Close() { _ = s.Set("", TLSFiles{}) }

// parsePath takes a file name as given (Calico checks nothing more).
func parsePath(s string) (string, error) { return s, nil }
