package ctl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"

	"github.com/calico-aio/calico-aio/store"
	"github.com/calico-aio/calico-aio/store/api"
	"github.com/calico-aio/calico-aio/store/etcdv3"
)

// exportData is an export read back: resources in import order, then IPAM.
type exportData struct {
	resources []exportedResource
	ipam      []store.Object // in ipamKinds' order
}

// exportedResource is one resource of an export: its decoded form (for the
// checks) and the value as exported (what is written, unmodelled fields too).
type exportedResource struct {
	res   api.Resource
	key   store.Key
	value []byte
}

// importOrder ranks the kinds import writes first: ClusterInformation (it
// keeps the target locked), tiers before their policies, pools before IPAM.
var importOrder = map[string]int{"ClusterInformation": 0, "Tier": 1, "IPPool": 2}

func importFile(ctx context.Context, c *store.Client, o IO, file string) error {
	if file == "" {
		return errors.New("usage: calicoctl datastore migrate import -f FILE")
	}
	data, err := readInput(file, o.Stdin)
	if err != nil {
		return err
	}
	ex, err := parseExport(data)
	if err != nil {
		return err
	}
	return migrateImport(ctx, c, o.Stderr, ex)
}

func (ex *exportData) readResources(data []byte) error {
	raws, err := parseDocuments(data)
	if err != nil {
		return err
	}
	for i, raw := range raws {
		r, err := api.Decode(raw)
		if err != nil {
			return fmt.Errorf("export document %d: %w", i+1, err)
		}
		if err := ex.add(r, fmt.Sprintf("document %d", i+1)); err != nil {
			return err
		}
	}
	return nil
}

// add checks r (where names it in errors) and queues it for import.
func (ex *exportData) add(r api.Resource, where string) error {
	k, _ := api.LookupKind(r.GetTypeMeta().Kind)
	if derivedKinds[k.Kind] {
		return fmt.Errorf("export %s: a %s is derived from Kubernetes in a Kubernetes datastore and cannot be imported", where, k.Kind)
	}
	if err := r.Validate(); err != nil {
		return fmt.Errorf("export %s (%s): %w", where, resourceID(r), err)
	}
	m := r.GetObjectMeta()
	m.ResourceVersion = ""
	val, err := store.Encode(r)
	if err != nil {
		return fmt.Errorf("export %s: %w", where, err)
	}
	ex.resources = append(ex.resources, exportedResource{res: r, key: store.ResourceKey(k, m.Namespace, m.Name), value: val})
	return nil
}

func rank(kind string) int {
	if r, ok := importOrder[kind]; ok {
		return r
	}
	return len(importOrder)
}

// migrateImport writes an export into c, a Kubernetes datastore with no
// Calico data yet: resources, then Nodes onto the Kubernetes Nodes that
// exist (warned about on warn otherwise), then IPAM in ipamKinds' order.
func migrateImport(ctx context.Context, c *store.Client, warn io.Writer, ex *exportData) error {
	if _, isEtcd := etcdv3.Of(c.Backend); isEtcd {
		return errors.New("Invalid datastore type: etcdv3 to import to for datastore migration. Datastore type must be kubernetes")
	}
	if err := ex.checkLocked(); err != nil {
		return err
	}
	if err := checkEmpty(ctx, c); err != nil {
		return err
	}
	sort.SliceStable(ex.resources, func(i, j int) bool { return rank(ex.resources[i].key.Kind) < rank(ex.resources[j].key.Kind) })
	for _, r := range ex.resources {
		if err := importResource(ctx, c, warn, r); err != nil {
			return err
		}
	}
	for _, o := range ex.ipam {
		if _, err := c.Create(ctx, o.Key, o.Value); err != nil {
			return fmt.Errorf("importing %s: %w", o.Key, err)
		}
	}
	return nil
}

// checkLocked refuses an export of a datastore that was not locked.
func (ex *exportData) checkLocked() error {
	for _, r := range ex.resources {
		if ci, ok := r.res.(*api.ClusterInformation); ok && ci.Metadata.Name == "default" {
			if ci.Spec.DatastoreReady != nil && !*ci.Spec.DatastoreReady {
				return nil
			}
			break
		}
	}
	return errors.New("the export is not of a locked datastore (its ClusterInformation default is missing or has datastoreReady true): run `calicoctl datastore migrate lock` on the etcd datastore, then export again")
}

// checkEmpty refuses a target that already holds Calico data other than
// ClusterInformation (calico-node may have written one) and Nodes.
func checkEmpty(ctx context.Context, c *store.Client) error {
	kinds := append([]string(nil), ipamKinds...)
	for _, k := range api.Kinds() {
		if !derivedKinds[k.Kind] && k.Kind != "ClusterInformation" && k.Kind != "Node" {
			kinds = append(kinds, k.Kind)
		}
	}
	for _, kind := range kinds {
		objs, _, err := c.List(ctx, store.ListOptions{Kind: kind})
		if err != nil {
			return fmt.Errorf("checking the datastore is empty: %w", err)
		}
		if len(objs) > 0 {
			return fmt.Errorf("the Kubernetes datastore already has Calico data (%s %s): import needs a datastore with no Calico resources or IPAM data", kind, objs[0].Key.Name)
		}
	}
	return nil
}

// importResource creates one resource; ClusterInformation replaces what
// calico-node may have written, and a Node goes onto its Kubernetes Node.
func importResource(ctx context.Context, c *store.Client, warn io.Writer, r exportedResource) error {
	if r.key.Kind != "ClusterInformation" && r.key.Kind != "Node" {
		if _, err := c.Create(ctx, r.key, r.value); err != nil {
			return fmt.Errorf("importing %s: %w", resourceID(r.res), err)
		}
		return nil
	}
	cur, err := c.Get(ctx, r.key)
	switch {
	case errors.Is(err, store.ErrNotFound) && r.key.Kind == "Node":
		fmt.Fprintf(warn, "Node %q: no Kubernetes Node of that name; not imported (calico-node writes it when it starts on that node)\n", r.key.Name)
		return nil
	case errors.Is(err, store.ErrNotFound):
		_, err = c.Create(ctx, r.key, r.value)
	case err == nil:
		_, err = c.Update(ctx, r.key, r.value, cur.Revision)
	}
	if err != nil {
		return fmt.Errorf("importing %s: %w", resourceID(r.res), err)
	}
	return nil
}
