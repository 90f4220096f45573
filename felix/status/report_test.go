package status

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/calico-aio/calico-aio/store/api"
	"github.com/calico-aio/calico-aio/store/storetest"
)

// TestStatusReportingLive drives the status reporter with an explicit
// clock against a real etcd: the agent status key is written every
// reportingInterval on a lease of reportingTTL, a TTL change takes a new
// lease, reportingInterval 0 removes the key; endpoint statuses are written
// only when endpointReportingEnabled, at most once per
// endpointReportingDelay, and turning them off removes ours.
func TestStatusReportingLive(t *testing.T) {
	e := storetest.StartEtcd(t)
	c := e.Client(t)
	cli := storetest.Raw(t, c).Etcd()
	ctx := context.Background()
	get := func(key string) *clientKV {
		t.Helper()
		r, err := cli.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Kvs) == 0 {
			return nil
		}
		return &clientKV{version: r.Kvs[0].Version, lease: clientv3.LeaseID(r.Kvs[0].Lease), value: string(r.Kvs[0].Value)}
	}
	grantedTTL := func(id clientv3.LeaseID) int64 {
		t.Helper()
		r, err := cli.TimeToLive(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return r.GrantedTTL
	}
	// A leftover of an earlier run, and another node's key (not ours).
	leftover := statusPrefix + "n1/workload/cni/old/endpoint/eth0"
	other := statusPrefix + "n2/workload/cni/pod/endpoint/eth0"
	for _, k := range []string{leftover, other} {
		if _, err := cli.Put(ctx, k, `{"status":"up"}`); err != nil {
			t.Fatal(err)
		}
	}

	var s api.FelixConfigurationSpec
	r := NewReporter(c, "n1", ConfigOf(&s)) // Calico's defaults
	agentKey := statusPrefix + "n1/status"
	t0 := time.Unix(1_700_000_000, 0)
	tick := func(at time.Duration) {
		t.Helper()
		if err := r.Tick(ctx, t0.Add(at)); err != nil {
			t.Fatal(err)
		}
	}
	tick(0)
	kv := get(agentKey)
	if kv == nil || kv.version != 1 {
		t.Fatalf("agent status after the first tick: %+v", kv)
	}
	if ttl := grantedTTL(kv.lease); ttl != 90 {
		t.Errorf("status lease TTL %d, want reportingTTL 90", ttl)
	}
	if d := r.Next(t0.Add(10 * time.Second)); d != 20*time.Second {
		t.Errorf("next report in %s, want 20s (reportingInterval 30s)", d)
	}
	tick(10 * time.Second)
	if kv := get(agentKey); kv.version != 1 {
		t.Errorf("written again before reportingInterval: version %d", kv.version)
	}
	tick(30 * time.Second)
	if kv := get(agentKey); kv.version != 2 {
		t.Errorf("not refreshed after reportingInterval: version %d", kv.version)
	}

	// Endpoints: not reported by default; the leftover of ours goes.
	epKey := r.EndpointKey("cni", "ns.pod", "eth0")
	r.SetEndpoints(map[string]string{epKey: "up"})
	tick(31 * time.Second)
	if get(epKey) != nil || get(leftover) != nil {
		t.Errorf("endpoint status written while endpointReportingEnabled is false: %v %v", get(epKey), get(leftover))
	}
	if get(other) == nil {
		t.Errorf("another node's endpoint status was deleted")
	}

	// Live: a shorter interval, a new TTL, endpoints on with a 5 s delay.
	s.ReportingInterval, s.ReportingTTL = dur(10*time.Second), dur(45*time.Second)
	on := true
	s.EndpointReportingEnabled, s.EndpointReportingDelay = &on, dur(5*time.Second)
	r.Configure(ConfigOf(&s))
	tick(32 * time.Second) // the TTL changed: a new lease, at once
	kv = get(agentKey)
	if ttl := grantedTTL(kv.lease); ttl != 45 {
		t.Errorf("status lease TTL %d after reportingTTL 45s", ttl)
	}
	if get(epKey) != nil {
		t.Errorf("endpoint status written within endpointReportingDelay of the last write (31 s)")
	}
	tick(36 * time.Second)
	if get(epKey) == nil || get(epKey).value != `{"status":"up"}` {
		t.Errorf("endpoint status not reported once enabled: %v", get(epKey))
	}
	r.SetEndpoints(nil) // the endpoint goes; within the delay nothing is written
	tick(38 * time.Second)
	if get(epKey) == nil {
		t.Errorf("endpoint status removed before endpointReportingDelay passed")
	}
	if d := r.Next(t0.Add(38 * time.Second)); d != 3*time.Second {
		t.Errorf("next endpoint write in %s, want 3s", d)
	}
	tick(41 * time.Second)
	if get(epKey) != nil {
		t.Errorf("endpoint status still there after endpointReportingDelay")
	}
	v := get(agentKey).version
	tick(42 * time.Second) // 10 s after the last report (32 s)
	if got := get(agentKey).version; got != v+1 {
		t.Errorf("version %d after a 10 s interval, want %d", got, v+1)
	}

	// Endpoints on, then off: ours are removed.
	r.SetEndpoints(map[string]string{epKey: "up"})
	tick(46 * time.Second)
	if get(epKey) == nil {
		t.Fatal("endpoint status not reported")
	}
	off := false
	s.EndpointReportingEnabled = &off
	r.Configure(ConfigOf(&s))
	tick(51 * time.Second)
	if get(epKey) != nil {
		t.Errorf("endpoint status kept after endpointReportingEnabled false")
	}

	// reportingInterval 0: no status reports, the key goes.
	s.ReportingInterval = dur(0)
	r.Configure(ConfigOf(&s))
	tick(52 * time.Second)
	if kv := get(agentKey); kv != nil {
		t.Errorf("agent status kept with reportingInterval 0: %+v", kv)
	}
	tick(200 * time.Second)
	if kv := get(agentKey); kv != nil || r.Next(t0.Add(200*time.Second)) != 0 {
		t.Errorf("reporting with reportingInterval 0: %+v, next %s", kv, r.Next(t0.Add(200*time.Second)))
	}
}

type clientKV struct {
	version int64
	lease   clientv3.LeaseID
	value   string
}

func dur(d time.Duration) *api.Duration { return &api.Duration{Duration: d} }
