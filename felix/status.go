package felix

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/calico-aio/calico-aio/store"
)

// statusPrefix is where Calico's Felix reports status in etcd.
const statusPrefix = "/calico/felix/v2/no-region/host/"

// statusReporter writes the agent's and its endpoints' status under
// Calico's felix status keys, attached to a lease so that a dead agent's
// status expires.
type statusReporter struct {
	c        *store.Client
	node     string
	lease    clientv3.LeaseID
	started  time.Time
	reported map[string]string // key -> value last written
	lastBeat time.Time         // when the agent status was last written
}

func newStatusReporter(c *store.Client, node string) *statusReporter {
	return &statusReporter{c: c, node: node, started: time.Now(), reported: map[string]string{}}
}

func (r *statusReporter) ensureLease(ctx context.Context) error {
	if r.lease != 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	g, err := r.c.Etcd().Grant(ctx, 90)
	if err != nil {
		return fmt.Errorf("status lease: %w", err)
	}
	ch, err := r.c.Etcd().KeepAlive(context.WithoutCancel(ctx), g.ID)
	if err != nil {
		return fmt.Errorf("status lease keepalive: %w", err)
	}
	go func() {
		for range ch { // drain keepalive responses
		}
	}()
	r.lease = g.ID
	return nil
}

// endpointStatusKey is the status key of a workload endpoint.
func (r *statusReporter) endpointStatusKey(orchestrator, workload, endpoint string) string {
	return fmt.Sprintf("%s%s/workload/%s/%s/endpoint/%s", statusPrefix, r.node, orchestrator, workload, endpoint)
}

// report writes the agent status and the given endpoint statuses (key ->
// "up"), deleting endpoint keys no longer reported. Only changes are written.
func (r *statusReporter) report(ctx context.Context, endpoints map[string]string) error {
	if err := r.ensureLease(ctx); err != nil {
		return err
	}
	want := map[string]string{}
	for k, st := range endpoints {
		b, _ := json.Marshal(map[string]string{"status": st})
		want[k] = string(b)
	}
	changed := len(want) != len(r.reported)
	for k, v := range want {
		changed = changed || r.reported[k] != v
	}
	if !changed && time.Since(r.lastBeat) < 20*time.Second {
		return nil // nothing new; the agent status is refreshed at most every 20 s
	}
	agent, _ := json.Marshal(map[string]any{"time": time.Now().UTC().Format(time.RFC3339), "uptime": time.Since(r.started).Seconds(), "first_update": len(r.reported) == 0})
	var ops []clientv3.Op
	ops = append(ops, clientv3.OpPut(statusPrefix+r.node+"/status", string(agent), clientv3.WithLease(r.lease)))
	for k, v := range want {
		if r.reported[k] != v {
			ops = append(ops, clientv3.OpPut(k, v, clientv3.WithLease(r.lease)))
		}
	}
	for k := range r.reported {
		if _, ok := want[k]; !ok {
			ops = append(ops, clientv3.OpDelete(k))
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for len(ops) > 0 {
		n := min(len(ops), 100)
		if _, err := r.c.Etcd().Txn(ctx).Then(ops[:n]...).Commit(); err != nil {
			r.lease = 0 // the lease may be gone: grant a new one next time
			return fmt.Errorf("writing status: %w", err)
		}
		ops = ops[n:]
	}
	r.reported = want
	r.lastBeat = time.Now()
	slog.Debug("status reported", "endpoints", len(want))
	return nil
}
