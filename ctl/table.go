package ctl

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"

	"github.com/calico-aio/calico-aio/store"
	"github.com/calico-aio/calico-aio/store/api"
)

// tableContext is data a column needs beyond the object itself.
type tableContext struct {
	defaultASN string
}

// column renders one table column from an object's generic JSON form.
type column struct {
	header string
	value  func(obj map[string]any, tc tableContext) string
}

type table struct{ cols []column }

// path reads a dotted JSON path as text ("" when absent).
func path(p string) func(map[string]any, tableContext) string {
	return func(obj map[string]any, _ tableContext) string { return text(lookup(obj, p)) }
}

// boolPath reads a boolean that defaults to false.
func boolPath(p string) func(map[string]any, tableContext) string {
	return func(obj map[string]any, _ tableContext) string {
		if b, ok := lookup(obj, p).(bool); ok && b {
			return "true"
		}
		return "false"
	}
}

func lookup(obj map[string]any, p string) any {
	var cur any = obj
	for _, part := range strings.Split(p, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[part]
	}
	return cur
}

func text(v any) string {
	switch t := v.(type) {
	case nil:
		return ""
	case string:
		return t
	case []any:
		parts := make([]string, len(t))
		for i, e := range t {
			parts[i] = text(e)
		}
		return strings.Join(parts, ",")
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = k + "=" + text(t[k])
		}
		return strings.Join(parts, ",")
	case float64:
		return fmt.Sprintf("%g", t)
	}
	return fmt.Sprint(v)
}

var (
	colName      = column{"NAME", path("metadata.name")}
	colNamespace = column{"NAMESPACE", path("metadata.namespace")}
)

// Columns per kind, as calicoctl prints them: ps, then wide. Built on first
// use: every process of the binary (each CNI call) runs the package inits.
var tables = sync.OnceValue(func() map[string][2][]column {
	return map[string][2][]column{
		"IPPool": {
			{colName, {"CIDR", path("spec.cidr")}, {"SELECTOR", path("spec.nodeSelector")}},
			{colName, {"CIDR", path("spec.cidr")}, {"NAT", boolPath("spec.natOutgoing")}, {"IPIPMODE", path("spec.ipipMode")},
				{"VXLANMODE", path("spec.vxlanMode")}, {"DISABLED", boolPath("spec.disabled")},
				{"DISABLEBGPEXPORT", boolPath("spec.disableBGPExport")}, {"SELECTOR", path("spec.nodeSelector")},
				{"ASSIGNMENTMODE", path("spec.assignmentMode")}},
		},
		"Node": {
			{colName},
			{colName, {"ASN", nodeASN}, {"IPV4", path("spec.bgp.ipv4Address")}, {"IPV6", path("spec.bgp.ipv6Address")}},
		},
		"WorkloadEndpoint": {
			{{"WORKLOAD", path("spec.workload")}, {"NODE", path("spec.node")}, {"NETWORKS", path("spec.ipNetworks")}, {"INTERFACE", path("spec.interfaceName")}},
			{colName, {"WORKLOAD", path("spec.workload")}, {"NODE", path("spec.node")}, {"NETWORKS", path("spec.ipNetworks")},
				{"INTERFACE", path("spec.interfaceName")}, {"PROFILES", path("spec.profiles")}, {"NATS", nats}},
		},
		"HostEndpoint": {
			{colName, {"NODE", path("spec.node")}},
			{colName, {"NODE", path("spec.node")}, {"INTERFACE", path("spec.interfaceName")}, {"IPS", path("spec.expectedIPs")}, {"PROFILES", path("spec.profiles")}},
		},
		"Profile": {
			{colName},
			{colName, {"LABELS", path("spec.labelsToApply")}},
		},
		"NetworkPolicy": {
			{colName},
			{colName, {"ORDER", path("spec.order")}, {"SELECTOR", path("spec.selector")}},
		},
		"GlobalNetworkPolicy": {
			{colName},
			{colName, {"ORDER", path("spec.order")}, {"SELECTOR", path("spec.selector")}},
		},
		"NetworkSet": {
			{colName},
			{colName, {"NETS", path("spec.nets")}},
		},
		"GlobalNetworkSet": {
			{colName},
			{colName, {"NETS", path("spec.nets")}},
		},
		"BGPPeer": {
			{colName, {"PEERIP", path("spec.peerIP")}, {"NODE", peerNode}, {"ASN", path("spec.asNumber")}},
			{colName, {"PEERIP", path("spec.peerIP")}, {"NODE", peerNode}, {"ASN", path("spec.asNumber")}},
		},
		"BGPConfiguration": {
			{colName, {"LOGSEVERITY", path("spec.logSeverityScreen")}, {"MESHENABLED", path("spec.nodeToNodeMeshEnabled")}, {"ASNUMBER", path("spec.asNumber")}},
			{colName, {"LOGSEVERITY", path("spec.logSeverityScreen")}, {"MESHENABLED", path("spec.nodeToNodeMeshEnabled")}, {"ASNUMBER", path("spec.asNumber")}},
		},
		"Tier": {
			{colName, {"ORDER", path("spec.order")}},
			{colName, {"ORDER", path("spec.order")}, {"DEFAULTACTION", path("spec.defaultAction")}},
		},
	}
})

func nodeASN(obj map[string]any, tc tableContext) string {
	if asn := text(lookup(obj, "spec.bgp.asNumber")); asn != "" {
		return asn
	}
	if lookup(obj, "spec.bgp") == nil {
		return ""
	}
	return "(" + tc.defaultASN + ")"
}

func peerNode(obj map[string]any, _ tableContext) string {
	if n := text(lookup(obj, "spec.node")); n != "" {
		return n
	}
	if s := text(lookup(obj, "spec.nodeSelector")); s != "" {
		return s
	}
	return "(global)"
}

func nats(obj map[string]any, _ tableContext) string {
	list, _ := lookup(obj, "spec.ipNATs").([]any)
	parts := make([]string, 0, len(list))
	for _, n := range list {
		m, _ := n.(map[string]any)
		parts = append(parts, text(m["externalIP"])+"->"+text(m["internalIP"]))
	}
	return strings.Join(parts, ",")
}

// defaultASN is the cluster AS number for nodes without their own.
func defaultASN(ctx context.Context, c *store.Client) string {
	k, _ := api.LookupKind("BGPConfiguration")
	if r, err := c.GetResource(ctx, k, "", "default"); err == nil {
		j, _ := json.Marshal(r)
		var m map[string]any
		if json.Unmarshal(j, &m) == nil {
			if asn := text(lookup(m, "spec.asNumber")); asn != "" {
				return asn
			}
		}
	}
	return "64512"
}

func tableFor(k api.KindInfo, wide, allNamespaces bool) table {
	cols := []column{colName}
	if t, ok := tables()[k.Kind]; ok {
		cols = t[0]
		if wide {
			cols = t[1]
		}
	}
	if allNamespaces {
		cols = append([]column{colNamespace}, cols...)
	}
	return table{cols: cols}
}

// print writes the table as calicoctl does: columns padded by three spaces,
// every cell followed by the padding, and a blank line after.
func (t table) print(w io.Writer, objs []api.Resource, tc tableContext) error {
	tw := tabwriter.NewWriter(w, 0, 0, 3, ' ', 0)
	for _, c := range t.cols {
		fmt.Fprint(tw, c.header, "\t")
	}
	fmt.Fprintln(tw)
	for _, r := range objs {
		j, err := json.Marshal(r)
		if err != nil {
			return err
		}
		var m map[string]any
		if err := json.Unmarshal(j, &m); err != nil {
			return err
		}
		for _, c := range t.cols {
			fmt.Fprint(tw, c.value(m, tc), "\t")
		}
		fmt.Fprintln(tw)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintln(w)
	return err
}
