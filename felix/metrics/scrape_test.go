package metrics

import (
	"testing"

	"github.com/calico-aio/calico-aio/internal/promtest"
)

func scrape(t *testing.T, m *Metrics) promtest.Scrape {
	t.Helper()
	s, err := promtest.GetHandler(m.Handler())
	if err != nil {
		t.Fatal(err)
	}
	return s
}
