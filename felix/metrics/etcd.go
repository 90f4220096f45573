package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/calico-aio/calico-aio/store/embedded"
)

// AddEmbeddedEtcd serves the embedded etcd member's storage sizes, quota
// and alarms (calico_embedded_etcd_*).
func (m *Metrics) AddEmbeddedEtcd(s *embedded.Server) {
	m.reg.MustRegister(newEmbeddedEtcdCollector(s))
}

// embeddedEtcdCollector serves the embedded member's storage sizes, quota
// and alarms, read once per scrape. The size names follow etcd's own
// etcd_mvcc_db_total_size_in_bytes and _in_use_in_bytes.
type embeddedEtcdCollector struct {
	s                             *embedded.Server
	size, inUse, quota, alarm, df *prometheus.Desc
}

func newEmbeddedEtcdCollector(s *embedded.Server) *embeddedEtcdCollector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("calico_embedded_etcd_"+name, help, labels, nil)
	}
	return &embeddedEtcdCollector{s: s,
		size:  d("db_total_size_in_bytes", "Embedded etcd database file size; the quota counts this."),
		inUse: d("db_total_size_in_use_in_bytes", "Embedded etcd database bytes holding data (the rest is free pages a defrag returns)."),
		quota: d("quota_backend_bytes", "Embedded etcd database size at which the NOSPACE alarm refuses writes."),
		alarm: d("alarm_active", "1 while the embedded etcd alarm is raised (NOSPACE: writes refused).", "alarm"),
		df:    d("defrags_total", "Embedded etcd defragmentations done by the agent."),
	}
}

func (c *embeddedEtcdCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.size, c.inUse, c.quota, c.alarm, c.df} {
		ch <- d
	}
}

func (c *embeddedEtcdCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.s.Status()
	ch <- prometheus.MustNewConstMetric(c.size, prometheus.GaugeValue, float64(st.DBSize))
	ch <- prometheus.MustNewConstMetric(c.inUse, prometheus.GaugeValue, float64(st.DBSizeInUse))
	ch <- prometheus.MustNewConstMetric(c.quota, prometheus.GaugeValue, float64(st.Quota))
	ch <- prometheus.MustNewConstMetric(c.df, prometheus.CounterValue, float64(st.Defrags))
	served := map[string]bool{}
	for _, a := range []string{embedded.AlarmNoSpace, "CORRUPT"} { // served even when 0
		served[a] = true
		ch <- prometheus.MustNewConstMetric(c.alarm, prometheus.GaugeValue, boolValue(st.Alarm(a)), a)
	}
	for _, a := range st.Alarms {
		if !served[a] {
			served[a] = true
			ch <- prometheus.MustNewConstMetric(c.alarm, prometheus.GaugeValue, 1, a)
		}
	}
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
