package ctl

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/calico-aio/calico-aio/ipam"
	"github.com/calico-aio/calico-aio/store"
	"github.com/calico-aio/calico-aio/store/api"
)

// nodeRenames maps each Calico Node whose k8s orchRef names its Kubernetes
// node differently to that name: in a Kubernetes datastore a Node is the
// Kubernetes Node, so the Node, its block affinities and its blocks'
// "host:" affinity move to that name on export.
func nodeRenames(ctx context.Context, c *store.Client) (map[string]string, error) {
	k, _ := api.LookupKind("Node")
	nodes, _, err := c.ListResources(ctx, k, "")
	if err != nil {
		return nil, fmt.Errorf("exporting Node: %w", err)
	}
	out := map[string]string{}
	for _, r := range nodes {
		n := r.(*api.Node)
		for _, o := range n.Spec.OrchRefs {
			if o.Orchestrator == "k8s" && o.NodeName != "" && o.NodeName != n.Metadata.Name {
				out[n.Metadata.Name] = o.NodeName
			}
		}
	}
	return out, nil
}

// renameObject rewrites o's node names per renames: a Node's name, an
// affinity's node, a tunnel address's handle, a block's "host:" affinity
// and its allocations' node attribute and tunnel handles. Everything else in the value is kept as stored.
func renameObject(o *store.Object, renames map[string]string) error {
	if len(renames) == 0 {
		return nil
	}
	switch o.Key.Kind {
	case "Node":
		return editValue(o, func(v map[string]any) {
			if m, ok := v["metadata"].(map[string]any); ok {
				if to, ok := renames[fmt.Sprint(m["name"])]; ok {
					m["name"], o.Key.Name = to, to
				}
			}
		})
	case store.KindBlockAffinity:
		if to, ok := renames[o.Key.Node]; ok {
			o.Key.Node = to
		}
	case store.KindIPAMHandle:
		o.Key.Name = renameHandle(o.Key.Name, renames)
	case store.KindIPAMBlock:
		return editValue(o, func(v map[string]any) { renameBlock(v, renames) })
	}
	return nil
}

// renameHandle renames a node's tunnel address handle (a prefix of
// tunnelHandlePrefixes, then the node name) with its node.
func renameHandle(id string, renames map[string]string) string {
	for _, p := range tunnelHandlePrefixes {
		if node, ok := strings.CutPrefix(id, p); ok {
			if to, ok := renames[node]; ok {
				return p + to
			}
		}
	}
	return id
}

func renameBlock(v map[string]any, renames map[string]string) {
	if a, ok := v["affinity"].(string); ok && strings.HasPrefix(a, "host:") {
		if to, ok := renames[strings.TrimPrefix(a, "host:")]; ok {
			v["affinity"] = "host:" + to
		}
	}
	attrs, _ := v["attributes"].([]any)
	for _, at := range attrs {
		m, _ := at.(map[string]any)
		sec, _ := m["secondary"].(map[string]any)
		if to, ok := renames[fmt.Sprint(sec[ipam.AttrNode])]; ok {
			sec[ipam.AttrNode] = to
		}
		if h, ok := m["handle_id"].(string); ok {
			m["handle_id"] = renameHandle(h, renames)
		}
	}
}

// editValue applies edit to o's value as generic JSON.
func editValue(o *store.Object, edit func(map[string]any)) error {
	var v map[string]any
	if err := json.Unmarshal(o.Value, &v); err != nil {
		return fmt.Errorf("exporting %s: %w", o.Key, err)
	}
	edit(v)
	out, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("exporting %s: %w", o.Key, err)
	}
	o.Value = out
	return nil
}

// warnSkippedProfiles names on warn each Profile export leaves out that a
// Kubernetes datastore will not derive (not kns.*, ksa.* or the default).
func warnSkippedProfiles(ctx context.Context, c *store.Client, warn io.Writer) error {
	objs, _, err := c.List(ctx, store.ListOptions{Kind: "Profile"})
	if err != nil {
		return fmt.Errorf("exporting Profile: %w", err)
	}
	for _, o := range objs {
		n := o.Key.Name
		if !strings.HasPrefix(n, "kns.") && !strings.HasPrefix(n, "ksa.") && n != "projectcalico-default-allow" {
			fmt.Fprintf(warn, "Profile %q is not exported: a Kubernetes datastore has only the profiles it derives from Namespaces and ServiceAccounts\n", n)
		}
	}
	return nil
}
