// Package promtest scrapes a Prometheus text endpoint and reads series from
// it with Prometheus' own parser, for tests of the agent's /metrics.
package promtest

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Scrape is one parsed scrape: metric families by name.
type Scrape map[string]*dto.MetricFamily

// Get fetches url and parses it as the Prometheus text format.
func Get(url string) (Scrape, error) {
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return nil, fmt.Errorf("scraping %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		return nil, fmt.Errorf("scraping %s: %s: %s", url, resp.Status, body)
	}
	return Parse(resp.Body)
}

// GetHandler scrapes h's /metrics through a test server.
func GetHandler(h http.Handler) (Scrape, error) {
	srv := httptest.NewServer(h)
	defer srv.Close()
	return Get(srv.URL + "/metrics")
}

// Parse parses the Prometheus text format.
func Parse(r io.Reader) (Scrape, error) {
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("parsing scrape: %w", err)
	}
	return Scrape(fams), nil
}

// Type is the family's type ("counter", "gauge", "summary", "histogram",
// "untyped"), or "" when the scrape has no such family.
func (s Scrape) Type(name string) string {
	f, ok := s[name]
	if !ok {
		return ""
	}
	return strings.ToLower(f.GetType().String())
}

// LabelNames lists the label names of the family's series, sorted and
// joined by ",", one entry per distinct set.
func (s Scrape) LabelNames(name string) []string {
	seen := map[string]bool{}
	for _, m := range s[name].GetMetric() {
		var names []string
		for _, l := range m.GetLabel() {
			names = append(names, l.GetName())
		}
		sort.Strings(names)
		seen[strings.Join(names, ",")] = true
	}
	out := make([]string, 0, len(seen))
	for k := range seen {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Value returns the value of the series of family name whose labels include
// every given name=value pair ("k", "v", ...): a counter's or gauge's value,
// a summary's or histogram's sample count. ok is false when none matches.
func (s Scrape) Value(name string, labels ...string) (v float64, ok bool) {
	for _, m := range s[name].GetMetric() {
		if !hasLabels(m, labels) {
			continue
		}
		switch {
		case m.Counter != nil:
			return m.GetCounter().GetValue(), true
		case m.Gauge != nil:
			return m.GetGauge().GetValue(), true
		case m.Summary != nil:
			return float64(m.GetSummary().GetSampleCount()), true
		case m.Histogram != nil:
			return float64(m.GetHistogram().GetSampleCount()), true
		case m.Untyped != nil:
			return m.GetUntyped().GetValue(), true
		}
	}
	return 0, false
}

// Must is Value with 0 for a missing series.
func (s Scrape) Must(name string, labels ...string) float64 {
	v, _ := s.Value(name, labels...)
	return v
}

func hasLabels(m *dto.Metric, kv []string) bool {
	for i := 0; i+1 < len(kv); i += 2 {
		found := false
		for _, l := range m.GetLabel() {
			if l.GetName() == kv[i] && l.GetValue() == kv[i+1] {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}
