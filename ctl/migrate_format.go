package ctl

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/calico-aio/calico-aio/store"
	"github.com/calico-aio/calico-aio/store/api"
	"github.com/calico-aio/calico-aio/store/etcdv3"
)

// An export has Calico's layout, so that real calicoctl and ours can each
// import the other's: the resources as YAML documents, a "===" line,
// ClusterInformation default as JSON, a "===" line, then the IPAM objects
// as one JSON object of etcd key / value pairs (values in Calico's etcd
// shape, which is our model's).

// exportSeparator parts an export's three sections.
const exportSeparator = "==="

// ipamKV is one IPAM object of an export: its etcd key and value.
type ipamKV struct {
	Key   string          `json:"Key"`
	Value json.RawMessage `json:"Value"`
	TTL   int64           `json:"TTL"`
}

// ipamSection is an export's IPAM section.
type ipamSection struct {
	BlockAffinities []ipamKV `json:"block_affinities,omitempty"`
	Blocks          []ipamKV `json:"blocks,omitempty"`
	Handles         []ipamKV `json:"handles,omitempty"`
	Config          *ipamKV  `json:"config,omitempty"`
}

// ipamKinds are the IPAM kinds in the order import writes them: config,
// then handles before the blocks that count on them (as Calico's assign),
// then the affinities that confirm the blocks.
var ipamKinds = []string{store.KindIPAMConfig, store.KindIPAMHandle, store.KindIPAMBlock, store.KindBlockAffinity}

// slot is where kind's objects go in the section.
func (s *ipamSection) add(kind string, kv ipamKV) {
	switch kind {
	case store.KindBlockAffinity:
		s.BlockAffinities = append(s.BlockAffinities, kv)
	case store.KindIPAMBlock:
		s.Blocks = append(s.Blocks, kv)
	case store.KindIPAMHandle:
		s.Handles = append(s.Handles, kv)
	case store.KindIPAMConfig:
		s.Config = &kv
	}
}

// byKind lists the section's objects of kind.
func (s *ipamSection) byKind(kind string) []ipamKV {
	switch kind {
	case store.KindBlockAffinity:
		return s.BlockAffinities
	case store.KindIPAMBlock:
		return s.Blocks
	case store.KindIPAMHandle:
		return s.Handles
	}
	if s.Config != nil {
		return []ipamKV{*s.Config}
	}
	return nil
}

// writeClusterInfo writes ClusterInformation default as indented JSON.
func writeClusterInfo(ctx context.Context, c *store.Client, w io.Writer) error {
	k, _ := api.LookupKind("ClusterInformation")
	o, err := c.Get(ctx, store.ResourceKey(k, "", "default"))
	if err != nil {
		return fmt.Errorf("exporting ClusterInformation default: %w", err)
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, o.Value, "", "  "); err != nil {
		return fmt.Errorf("exporting ClusterInformation default: %w", err)
	}
	fmt.Fprintf(w, "%s\n", buf.Bytes())
	return nil
}

// writeIPAM writes every IPAM object, node names renamed, as one JSON object.
func writeIPAM(ctx context.Context, c *store.Client, w io.Writer, renames map[string]string) error {
	var sec ipamSection
	for _, kind := range ipamKinds {
		objs, err := listRenamed(ctx, c, kind, renames)
		if err != nil {
			return err
		}
		for _, o := range objs {
			key, err := etcdv3.EtcdKey(o.Key)
			if err != nil {
				return fmt.Errorf("exporting %s: %w", o.Key, err)
			}
			sec.add(kind, ipamKV{Key: key, Value: o.Value})
		}
	}
	out, err := json.MarshalIndent(sec, "", "  ")
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "%s\n", out)
	return nil
}

// parseExport reads an export's three sections.
func parseExport(data []byte) (*exportData, error) {
	parts := bytes.Split(append([]byte("\n"), data...), []byte("\n"+exportSeparator+"\n"))
	if len(parts) != 3 {
		return nil, fmt.Errorf("not a calicoctl datastore migrate export: want resources, a %q line, ClusterInformation, a %q line and IPAM; found %d sections", exportSeparator, exportSeparator, len(parts))
	}
	ex := &exportData{}
	if err := ex.readResources(parts[0]); err != nil {
		return nil, err
	}
	if err := ex.readClusterInfo(parts[1]); err != nil {
		return nil, err
	}
	if err := ex.readIPAM(parts[2]); err != nil {
		return nil, err
	}
	return ex, nil
}

func (ex *exportData) readClusterInfo(data []byte) error {
	r, err := api.Decode(bytes.TrimSpace(data))
	if err != nil {
		return fmt.Errorf("export ClusterInformation section: %w", err)
	}
	ci, ok := r.(*api.ClusterInformation)
	if !ok || ci.Metadata.Name != "default" {
		return fmt.Errorf("export ClusterInformation section: a %s %q, want ClusterInformation default", r.GetTypeMeta().Kind, r.GetObjectMeta().Name)
	}
	return ex.add(r, "ClusterInformation section")
}

func (ex *exportData) readIPAM(data []byte) error {
	var sec ipamSection
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&sec); err != nil {
		return fmt.Errorf("export IPAM section: %w", err)
	}
	for _, kind := range ipamKinds {
		for _, kv := range sec.byKind(kind) {
			key, ok := etcdv3.ModelKey(kv.Key)
			if !ok || key.Kind != kind || len(kv.Value) == 0 {
				return fmt.Errorf("export IPAM section: %q is not a %s key with a value", kv.Key, kind)
			}
			ex.ipam = append(ex.ipam, store.Object{Key: key, Value: kv.Value})
		}
	}
	if len(ex.ipam) == 0 {
		return errors.New("No IPAM resources specified in file")
	}
	return nil
}
