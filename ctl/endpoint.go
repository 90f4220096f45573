package ctl

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/calico-aio/calico-aio/store"
	"github.com/calico-aio/calico-aio/store/api"
	"github.com/calico-aio/calico-aio/store/etcdv3"
)

// runEndpoint is classic "calicoctl endpoint show": the workload endpoints
// of every node, summarised per node and orchestrator or (--detailed) one
// per row.
func runEndpoint(o IO, args []string) error {
	fs := newFlagSet("endpoint", o)
	var ds datastoreFlags
	ds.register(fs)
	host := fs.String("host", "", "only endpoints of this node")
	orch := fs.String("orchestrator", "", "only endpoints of this orchestrator (k8s, cni, docker, namespace)")
	workload := fs.String("workload", "", "only endpoints of this workload (container ID, namespace/pod, ...)")
	endpoint := fs.String("endpoint", "", "only the endpoint with this name")
	detailed := fs.Bool("detailed", false, "one row per endpoint, with addresses, MAC, profiles and state")
	const usage = "usage: calicoctl endpoint show [--host=<HOST>] [--orchestrator=<ID>] [--workload=<ID>] [--endpoint=<NAME>] [--detailed]"
	fs.Usage = func() {
		fmt.Fprintf(o.Stderr, "%s\n\nOptions:\n", usage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if rest := fs.Args(); len(rest) != 1 || rest[0] != "show" {
		return fmt.Errorf("%s", usage)
	}
	ctx := context.Background()
	c, err := connect(ctx, &ds, o)
	if err != nil {
		return err
	}
	defer c.Close()
	all, _, err := c.ListResources(ctx, wepKind(), "")
	if err != nil {
		return datastoreError(c, err)
	}
	var eps []*api.WorkloadEndpoint
	for _, r := range all {
		w := r.(*api.WorkloadEndpoint)
		if (*host == "" || w.Spec.Node == *host) && (*orch == "" || w.Spec.Orchestrator == *orch) &&
			(*workload == "" || workloadName(w) == *workload) && (*endpoint == "" || w.Metadata.Name == *endpoint) {
			eps = append(eps, w)
		}
	}
	sort.SliceStable(eps, func(i, j int) bool {
		a, b := eps[i], eps[j]
		if a.Spec.Node != b.Spec.Node {
			return a.Spec.Node < b.Spec.Node
		}
		if a.Spec.Orchestrator != b.Spec.Orchestrator {
			return a.Spec.Orchestrator < b.Spec.Orchestrator
		}
		if workloadName(a) != workloadName(b) {
			return workloadName(a) < workloadName(b)
		}
		return a.Metadata.Name < b.Metadata.Name
	})
	if *detailed {
		states := endpointStates(ctx, c)
		t := newBoxTable("Hostname", "Orchestrator ID", "Workload ID", "Endpoint ID", "Addresses", "MAC", "Profiles", "State")
		for _, w := range eps {
			t.add(w.Spec.Node, w.Spec.Orchestrator, workloadName(w), w.Metadata.Name, strings.Join(w.Spec.IPNetworks, ","),
				w.Spec.MAC, strings.Join(w.Spec.Profiles, ","), states.of(w))
		}
		return t.write(o.Stdout)
	}
	type group struct{ node, orch string }
	workloads := map[group]map[string]bool{}
	counts := map[group]int{}
	var order []group
	for _, w := range eps {
		g := group{w.Spec.Node, w.Spec.Orchestrator}
		if workloads[g] == nil {
			workloads[g] = map[string]bool{}
			order = append(order, g)
		}
		workloads[g][workloadName(w)] = true
		counts[g]++
	}
	t := newBoxTable("Hostname", "Orchestrator ID", "Number of Workloads", "Number of Endpoints")
	for _, g := range order {
		t.add(g.node, g.orch, strconv.Itoa(len(workloads[g])), strconv.Itoa(counts[g]))
	}
	return t.write(o.Stdout)
}

// felixStatusPrefix is where calico-node reports endpoint status, as Felix
// does: <prefix><node>/workload/<orchestrator>/<workload>/endpoint/<endpoint>
// = {"status":"up"}.
const felixStatusPrefix = "/calico/felix/v2/no-region/host/"

// epStates are the endpoint statuses calico-node reported, by key.
type epStates map[string]string

// They live in etcd only, as Calico's; another datastore has none.
func endpointStates(ctx context.Context, c *store.Client) epStates {
	raw, ok := etcdv3.Of(c.Backend)
	if !ok {
		return nil
	}
	kvs, _, err := raw.ListPrefix(ctx, felixStatusPrefix)
	if err != nil {
		return nil
	}
	out := epStates{}
	for _, kv := range kvs {
		var v struct {
			Status string `json:"status"`
		}
		if json.Unmarshal(kv.Value, &v) == nil && v.Status != "" {
			out[kv.Key] = v.Status
		}
	}
	return out
}

// of is an endpoint's status, "" when none is reported.
func (s epStates) of(w *api.WorkloadEndpoint) string {
	return s[fmt.Sprintf("%s%s/workload/%s/%s/endpoint/%s", felixStatusPrefix, w.Spec.Node, w.Spec.Orchestrator, workloadName(w), w.Spec.Endpoint)]
}
