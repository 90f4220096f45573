package health

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/calico-aio/calico-aio/felix/metrics"
	"github.com/calico-aio/calico-aio/store/embedded"
	"github.com/calico-aio/calico-aio/store/storetest"
)

// TestEmbeddedEtcdQuotaAlarmSurfaces fills a real embedded member's tiny
// quota: readiness turns 503 naming the NOSPACE alarm and the metrics show
// the alarm, the sizes and the quota.
func TestEmbeddedEtcdQuotaAlarmSurfaces(t *testing.T) {
	const quota = 1 << 20
	srv := storetest.StartEtcdWith(t, func(c *embedded.Config) {
		c.QuotaBackendBytes, c.DefragCheckInterval = quota, -1
	}).Server
	ctx := context.Background()
	cl, err := clientv3.New(clientv3.Config{Endpoints: srv.Endpoints(), DialTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()

	h, m := New(time.Hour), metrics.New("test-node", "")
	h.Beat()
	h.SetReady(true)
	h.WatchEmbeddedEtcd(srv)
	m.AddEmbeddedEtcd(srv)
	if code, body := readiness(t, h); code != http.StatusOK {
		t.Fatalf("readiness before filling: %d %q", code, body)
	}
	if v := gauge(t, m, "calico_embedded_etcd_alarm_active", embedded.AlarmNoSpace); v != 0 {
		t.Fatalf("NOSPACE alarm metric %v before filling", v)
	}

	val := strings.Repeat("q", 64<<10)
	for i := 0; i < 1000 && err == nil; i++ {
		_, err = cl.Put(ctx, fmt.Sprintf("/fill/%04d", i), val)
	}
	if !errors.Is(err, rpctypes.ErrNoSpace) {
		t.Fatalf("filling a %d-byte quota: %v, want %v", quota, err, rpctypes.ErrNoSpace)
	}
	code, body := readiness(t, h)
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "NOSPACE") {
		t.Errorf("readiness over quota: %d %q, want 503 naming NOSPACE", code, body)
	}
	if v := gauge(t, m, "calico_embedded_etcd_alarm_active", embedded.AlarmNoSpace); v != 1 {
		t.Errorf("NOSPACE alarm metric %v, want 1", v)
	}
	if v := gauge(t, m, "calico_embedded_etcd_alarm_active", "CORRUPT"); v != 0 {
		t.Errorf("CORRUPT alarm metric %v, want 0", v)
	}
	if v := gauge(t, m, "calico_embedded_etcd_quota_backend_bytes", ""); v != quota {
		t.Errorf("quota metric %v, want %d", v, quota)
	}
	// etcd raises NOSPACE when the next write would pass the quota, so the
	// file can stop a page or two short of it.
	if v := gauge(t, m, "calico_embedded_etcd_db_total_size_in_bytes", ""); v < quota*9/10 {
		t.Errorf("db size metric %v, want near the %d quota", v, quota)
	}
	if v := gauge(t, m, "calico_embedded_etcd_db_total_size_in_use_in_bytes", ""); v <= 0 {
		t.Errorf("db in-use metric %v", v)
	}
}

func readiness(t *testing.T, h *Health) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readiness", nil))
	b, _ := io.ReadAll(rec.Result().Body)
	return rec.Code, string(b)
}

// gauge gathers m and returns the value of the named series (with that
// "alarm" label when label is set), failing when it is missing.
func gauge(t *testing.T, m prometheus.Gatherer, name, label string) float64 {
	t.Helper()
	fams, err := m.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, mt := range f.GetMetric() {
			if label == "" || alarmLabel(mt) == label {
				if mt.GetGauge() != nil {
					return mt.GetGauge().GetValue()
				}
				return mt.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("metric %s{alarm=%q} not served", name, label)
	return 0
}

func alarmLabel(m *dto.Metric) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == "alarm" {
			return l.GetValue()
		}
	}
	return ""
}
