package metrics

import (
	"log/slog"
	"slices"
	"strings"

	"github.com/calico-aio/calico-aio/felix/calc"
	"github.com/calico-aio/calico-aio/store/api"
	"github.com/prometheus/client_golang/prometheus"
)

// unsupportedTracker watches decoded resources for fields this agent does
// not honour (api.Unsupported). Our writers refuse them, but another tool
// (real Calico sharing the datastore, etcdctl) can store them. Each
// resource is logged once, and again only when its set of fields changes;
// a gauge counts, per kind, the resources currently carrying any.
//
// What the agent does with such a resource is what it does with every
// field it ignores: it acts as if the field were unset (docs/POLICY.md).
type unsupportedTracker struct {
	seen  map[string]string // key -> the fields last logged, joined
	kinds map[string]string // key -> kind, for the gauge
	gauge *prometheus.GaugeVec
	log   *slog.Logger
}

func newUnsupportedTracker() *unsupportedTracker {
	return &unsupportedTracker{
		seen: map[string]string{}, kinds: map[string]string{}, log: slog.Default(),
		gauge: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "calico_unsupported_fields_resources",
			Help: "Resources in the datastore carrying fields this agent does not honour (logged once each), by kind.",
		}, []string{"kind"}),
	}
}

// observe records one datastore update.
func (t *unsupportedTracker) observe(u calc.Update) {
	if u.Key == "" || u.Kind == calc.KindBlock || u.InSync {
		return
	}
	var fields []string
	kind := ""
	if !u.Deleted && u.Resource != nil {
		kind = u.Resource.GetTypeMeta().Kind
		for _, p := range api.Unsupported(u.Resource) {
			fields = append(fields, p.String())
		}
	}
	joined := strings.Join(fields, ", ")
	old, had := t.seen[u.Key]
	switch {
	case len(fields) == 0 && had:
		t.gauge.WithLabelValues(t.kinds[u.Key]).Dec()
		delete(t.seen, u.Key)
		delete(t.kinds, u.Key)
		if !u.Deleted {
			t.log.Info("resource no longer carries unsupported fields", "key", u.Key)
		}
	case len(fields) > 0 && (!had || old != joined):
		if !had {
			t.gauge.WithLabelValues(kind).Inc()
			t.kinds[u.Key] = kind
		}
		t.seen[u.Key] = joined
		m := u.Resource.GetObjectMeta()
		t.log.Warn("resource carries fields this agent does not honour; they are ignored (see docs/POLICY.md)",
			"kind", kind, "namespace", m.Namespace, "name", m.Name, "fields", slices.Clone(fields))
	}
}
