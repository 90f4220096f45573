// Package status owns what calico-node reports of its own state for
// others to read: the agent and endpoint status keys in the datastore
// (Calico's /calico/felix/v2/) and the endpoint status files the CNI
// plugin waits for.
package status

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/calico-aio/calico-aio/store"
	"github.com/calico-aio/calico-aio/store/api"
	"github.com/calico-aio/calico-aio/store/etcdv3"
)

// statusPrefix is where Calico's Felix reports status in etcd.
const statusPrefix = "/calico/felix/v2/no-region/host/"

// Config is what FelixConfiguration says about status reports.
type Config struct {
	// interval (reportingInterval) is how often the agent's own status key
	// is written, 0 for never; ttl (reportingTTL) is that key's lease.
	interval, ttl time.Duration
	// endpoints (endpointReportingEnabled) turns endpoint status keys on;
	// delay (endpointReportingDelay) is the least time between two writes
	// of them.
	endpoints bool
	delay     time.Duration
}

// ConfigOf reads the status settings, Calico's defaults for unset ones.
func ConfigOf(s *api.FelixConfigurationSpec) Config {
	c := Config{interval: 30 * time.Second, ttl: 90 * time.Second, delay: time.Second}
	if s.ReportingInterval != nil {
		c.interval = s.ReportingInterval.Duration
	}
	if s.ReportingTTL != nil {
		c.ttl = s.ReportingTTL.Duration
	}
	if s.EndpointReportingEnabled != nil {
		c.endpoints = *s.EndpointReportingEnabled
	}
	if s.EndpointReportingDelay != nil {
		c.delay = s.EndpointReportingDelay.Duration
	}
	return c
}

// endpointLeaseTTL is the lease of endpoint status keys, kept alive while
// the agent runs, so that a dead agent's endpoint statuses expire.
const endpointLeaseTTL = 90

// Reporter writes, as Calico's Felix does, the agent's status
// (<prefix><node>/status, every reportingInterval, on a lease of
// reportingTTL that each write renews) and, when endpointReportingEnabled,
// its endpoints' statuses (<prefix><node>/workload/<orchestrator>/
// <workload>/endpoint/<endpoint> = {"status":"up"}), at most once per
// endpointReportingDelay. The loop calls tick when next says; all I/O
// happens there.
type Reporter struct {
	c       *store.Client
	node    string
	started time.Time
	cfg     Config

	// The agent status: its lease and the TTL it was granted with; when
	// it was last written (zero: not since the lease was made).
	lease    clientv3.LeaseID
	leaseTTL time.Duration
	lastBeat time.Time
	beats    int       // agent status writes, for first_update
	retryAt  time.Time // after a failed write, not before

	// Endpoint statuses: desired, and as written (nil: not yet read back
	// from etcd, so leftovers of an earlier run are found and removed).
	want, reported map[string]string
	haveWant       bool // SetEndpoints was called: the agent is in sync
	epLease        clientv3.LeaseID
	lastEpWrite    time.Time
	epRetryAt      time.Time // after a failed write, not before
}

// NewReporter reports for node through c.
func NewReporter(c *store.Client, node string, cfg Config) *Reporter {
	return &Reporter{c: c, node: node, started: time.Now(), cfg: cfg, want: map[string]string{}}
}

// Configure takes new settings; the next Tick acts on them.
func (r *Reporter) Configure(cfg Config) { r.cfg = cfg }

// EndpointKey is the status key of a workload endpoint.
func (r *Reporter) EndpointKey(orchestrator, workload, endpoint string) string {
	return statusPrefix + r.node + "/workload/" + orchestrator + "/" + workload + "/endpoint/" + endpoint
}

// ReportsEndpoints reports whether endpoint statuses are written
// (endpointReportingEnabled); when not, SetEndpoints' input is not used.
func (r *Reporter) ReportsEndpoints() bool { return r.cfg.endpoints }

func (r *Reporter) agentKey() string { return statusPrefix + r.node + "/status" }

// SetEndpoints records the endpoint statuses (key -> "up") to report.
func (r *Reporter) SetEndpoints(statuses map[string]string) {
	enc := make(map[string]string, 1) // one encoding per status, not per endpoint
	r.want, r.haveWant = make(map[string]string, len(statuses)), true
	for k, st := range statuses {
		v, ok := enc[st]
		if !ok {
			b, _ := json.Marshal(map[string]string{"status": st})
			v = string(b)
			enc[st] = v
		}
		r.want[k] = v
	}
}

// endpointsWanted is what etcd should hold: nothing when reporting is off.
func (r *Reporter) endpointsWanted() map[string]string {
	if !r.cfg.endpoints {
		return map[string]string{}
	}
	return r.want
}

func (r *Reporter) endpointsDirty() bool {
	return r.haveWant && (r.reported == nil || !maps.Equal(r.reported, r.endpointsWanted()))
}

func (r *Reporter) beatDue(now time.Time) bool {
	if now.Before(r.retryAt) {
		return false
	}
	if r.cfg.interval <= 0 {
		return r.lease != 0 // reporting turned off: the key goes
	}
	return r.lastBeat.IsZero() || r.leaseTTL != r.cfg.ttl || !now.Before(r.lastBeat.Add(r.cfg.interval))
}

// Next is how long until Tick has something to do (0: nothing planned).
func (r *Reporter) Next(now time.Time) time.Duration {
	var d time.Duration
	consider := func(at time.Time) {
		w := max(at.Sub(now), time.Millisecond)
		if d == 0 || w < d {
			d = w
		}
	}
	if now.Before(r.retryAt) {
		consider(r.retryAt)
	} else if r.beatDue(now) {
		consider(now)
	} else if r.cfg.interval > 0 {
		consider(r.lastBeat.Add(r.cfg.interval))
	}
	if r.endpointsDirty() {
		at := r.lastEpWrite.Add(r.cfg.delay)
		if r.epRetryAt.After(at) {
			at = r.epRetryAt
		}
		consider(at)
	}
	return d
}

// Tick writes what is due at now.
func (r *Reporter) Tick(ctx context.Context, now time.Time) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var errs []string
	if r.beatDue(now) {
		if err := r.beat(ctx, now); err != nil {
			errs = append(errs, err.Error())
			r.retryAt = now.Add(time.Second)
		}
	}
	if r.endpointsDirty() && !now.Before(r.lastEpWrite.Add(r.cfg.delay)) && !now.Before(r.epRetryAt) {
		if err := r.writeEndpoints(ctx); err != nil {
			errs = append(errs, err.Error())
			r.epRetryAt = now.Add(time.Second)
		}
		r.lastEpWrite = now
	}
	if len(errs) > 0 {
		return fmt.Errorf("status report: %s", strings.Join(errs, "; "))
	}
	return nil
}

// beat writes the agent status on its lease, renewing the lease; a TTL
// change or a lost lease takes a new one. Reporting off revokes the lease,
// which deletes the key.
func (r *Reporter) beat(ctx context.Context, now time.Time) error {
	cli, ok := r.etcd()
	if !ok {
		return nil
	}
	if r.cfg.interval <= 0 || r.leaseTTL != r.cfg.ttl {
		if r.lease != 0 {
			if _, err := cli.Revoke(ctx, r.lease); err != nil && !strings.Contains(err.Error(), "not found") {
				return fmt.Errorf("revoking the status lease: %w", err)
			}
			r.lease, r.lastBeat = 0, time.Time{}
		}
		if r.cfg.interval <= 0 {
			slog.Info("agent status reports off (reportingInterval 0)")
			return nil
		}
	}
	if r.lease != 0 {
		if _, err := cli.KeepAliveOnce(ctx, r.lease); err != nil {
			r.lease = 0 // expired (a report came later than reportingTTL) or unknown
		}
	}
	if r.lease == 0 {
		ttl := max(int64((r.cfg.ttl+time.Second-1)/time.Second), 1)
		g, err := cli.Grant(ctx, ttl)
		if err != nil {
			return fmt.Errorf("status lease (reportingTTL %s): %w", r.cfg.ttl, err)
		}
		r.lease, r.leaseTTL = g.ID, r.cfg.ttl
	}
	v, _ := json.Marshal(map[string]any{"time": now.UTC().Format(time.RFC3339), "uptime": now.Sub(r.started).Seconds(),
		"first_update": r.beats == 0})
	if _, err := cli.Put(ctx, r.agentKey(), string(v), clientv3.WithLease(r.lease)); err != nil {
		r.lease = 0
		return fmt.Errorf("writing %s: %w", r.agentKey(), err)
	}
	r.beats++
	r.lastBeat = now
	return nil
}

// writeEndpoints brings the endpoint keys to endpointsWanted: changed ones
// written, others of ours deleted (also those an earlier run left).
func (r *Reporter) writeEndpoints(ctx context.Context) error {
	cli, ok := r.etcd()
	if !ok {
		return nil
	}
	if r.reported == nil {
		prefix := statusPrefix + r.node + "/workload/"
		got, err := cli.Get(ctx, prefix, clientv3.WithPrefix())
		if err != nil {
			return fmt.Errorf("reading endpoint statuses: %w", err)
		}
		r.reported = map[string]string{}
		for _, kv := range got.Kvs {
			r.reported[string(kv.Key)] = "" // rewritten or deleted below
		}
	}
	want := r.endpointsWanted()
	var ops []clientv3.Op
	if len(want) > 0 && r.epLease == 0 {
		g, err := cli.Grant(ctx, endpointLeaseTTL)
		if err != nil {
			return fmt.Errorf("endpoint status lease: %w", err)
		}
		ch, err := cli.KeepAlive(context.WithoutCancel(ctx), g.ID)
		if err != nil {
			return fmt.Errorf("endpoint status lease keepalive: %w", err)
		}
		go func() {
			for range ch { // drain keepalive responses
			}
		}()
		r.epLease = g.ID
	}
	for k, v := range want {
		if r.reported[k] != v {
			ops = append(ops, clientv3.OpPut(k, v, clientv3.WithLease(r.epLease)))
		}
	}
	for k := range r.reported {
		if _, ok := want[k]; !ok {
			ops = append(ops, clientv3.OpDelete(k))
		}
	}
	for len(ops) > 0 {
		n := min(len(ops), 100)
		if _, err := cli.Txn(ctx).Then(ops[:n]...).Commit(); err != nil {
			r.epLease, r.reported = 0, nil // the lease may be gone: start over
			return fmt.Errorf("writing endpoint statuses: %w", err)
		}
		ops = ops[n:]
	}
	r.reported = maps.Clone(want)
	slog.Debug("endpoint status reported", "endpoints", len(want))
	return nil
}

// etcd is the etcd client the reports go to: Calico's felix status keys
// (/calico/felix/v2/) live in etcd only; on another datastore there are
// none, as in Calico.
func (r *Reporter) etcd() (*clientv3.Client, bool) {
	raw, ok := etcdv3.Of(r.c.Backend)
	if !ok {
		return nil, false
	}
	return raw.Etcd(), true
}
