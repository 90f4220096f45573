package ctl

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"sigs.k8s.io/yaml"

	"github.com/calico-aio/calico-aio/cni"
	"github.com/calico-aio/calico-aio/felix/peering"
	"github.com/calico-aio/calico-aio/store"
	"github.com/calico-aio/calico-aio/store/api"
	"github.com/calico-aio/calico-aio/store/etcdv3"
)

// diagCommands are the kernel state dumps of a diags bundle: file name,
// what calicoctl prints while taking it, the command.
var diagCommands = []struct {
	file, what string
	argv       []string
}{
	{"routes-ipv4.txt", "routes (IPv4)", []string{"ip", "-4", "route", "show", "table", "all"}},
	{"routes-ipv6.txt", "routes (IPv6)", []string{"ip", "-6", "route", "show", "table", "all"}},
	{"rules.txt", "routing rules", []string{"ip", "rule", "show"}},
	{"addresses.txt", "interface info (addresses)", []string{"ip", "addr", "show"}},
	{"links.txt", "interface info (links)", []string{"ip", "-d", "link", "show"}},
	{"neighbours.txt", "neighbours", []string{"ip", "neigh", "show"}},
	{"iptables-save.txt", "iptables (IPv4)", []string{"iptables-save", "-c"}},
	{"ip6tables-save.txt", "iptables (IPv6)", []string{"ip6tables-save", "-c"}},
	{"ipset-list.txt", "ipsets", []string{"ipset", "list"}},
}

// runner runs a command and returns its combined output.
type runner func(ctx context.Context, argv []string) ([]byte, error)

// hostRunner runs commands in calicoctl's own network namespace, or in
// the one at netnsPath (a node of a test or lab set up as a namespace).
func hostRunner(netnsPath string) runner {
	return func(ctx context.Context, argv []string) ([]byte, error) {
		run := func() ([]byte, error) { return exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput() }
		if netnsPath == "" {
			return run()
		}
		target, err := ns.GetNS(netnsPath)
		if err != nil {
			return nil, fmt.Errorf("--netns %s: %w", netnsPath, err)
		}
		defer target.Close()
		var out []byte
		err = target.Do(func(ns.NetNS) error {
			var e error
			out, e = run()
			return e
		})
		return out, err
	}
}

// bundle is the diags tarball's members in the order they were taken.
type bundle struct {
	names []string
	data  map[string][]byte
}

func (b *bundle) add(name string, data []byte) {
	if b.data == nil {
		b.data = map[string][]byte{}
	}
	if _, dup := b.data[name]; !dup {
		b.names = append(b.names, name)
	}
	b.data[name] = data
}

func runDiags(o IO, args []string) error {
	fs := newFlagSet("node diags", o)
	var ds datastoreFlags
	ds.register(fs)
	logDir := fs.String("log-dir", "/var/log/calico", "the directory of calico-node's logs")
	runDirDef := "/var/run/calico"
	if v := o.Getenv("CALICO_RUN_DIR"); v != "" {
		runDirDef = v
	}
	runDir := fs.String("run-dir", runDirDef, "calico-node's runtime directory (its status socket) [CALICO_RUN_DIR]")
	nodeName := fs.String("nodename", "", "this node's name (default: NODENAME, else <lib-dir>/nodename, else the hostname)")
	libDir := fs.String("lib-dir", "", "calico-node's state directory (default: CALICO_LIB_DIR, else "+cni.DefaultLibDir+")")
	netnsPath := fs.String("netns", "", "take the kernel state of the network namespace at this path instead of calicoctl's own")
	outDir := fs.String("output-dir", "", "where to write the bundle (default: a new temporary directory)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError(o, "Usage:\n  calicoctl node diags [--log-dir=<LOGDIR>] [--nodename=<NAME>] [--netns=<PATH>] [--output-dir=<DIR>]")
	}
	node := *nodeName
	if node == "" {
		node = o.Getenv("NODENAME")
	}
	if *libDir == "" {
		*libDir = o.Getenv("CALICO_LIB_DIR")
	}
	if *libDir == "" {
		*libDir = cni.DefaultLibDir
	}
	if n, err := (&cni.NetConf{Nodename: node, LibDir: *libDir}).NodeName(); err == nil {
		node = n
	}

	fmt.Fprintln(o.Stdout, "Collecting diagnostics")
	dir := *outDir
	if dir == "" {
		d, err := os.MkdirTemp("", "calico")
		if err != nil {
			return fmt.Errorf("creating a temporary directory: %w", err)
		}
		dir = d
	}
	fmt.Fprintf(o.Stdout, "Using temp dir: %s\n", dir)
	ctx := context.Background()
	var b bundle
	run := hostRunner(*netnsPath)
	for _, c := range diagCommands {
		fmt.Fprintf(o.Stdout, "Dumping %s\n", c.what)
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		out, err := run(cctx, c.argv)
		cancel()
		if err != nil {
			out = append(out, fmt.Sprintf("\n# %s failed: %v\n", strings.Join(c.argv, " "), err)...)
		}
		b.add(c.file, out)
	}
	fmt.Fprintln(o.Stdout, "Dumping calico-node status")
	sock := filepath.Join(*runDir, peering.StatusSocketName)
	if st, err := readNodeStatus(sock); err != nil {
		b.add("node-status.txt", []byte(fmt.Sprintf("Calico process is not running (no answer on %s: %v)\n", sock, err)))
	} else {
		j, _ := json.MarshalIndent(st, "", "  ")
		b.add("node-status.json", append(j, '\n'))
	}
	fmt.Fprintln(o.Stdout, "Copying Calico logs")
	if n := addLogs(&b, *logDir); n == 0 {
		fmt.Fprintf(o.Stdout, "No logs found in %s; skipping log copying\n", *logDir)
	}
	fmt.Fprintf(o.Stdout, "Dumping datastore objects for node %s\n", node)
	if err := addDatastore(ctx, o, &ds, &b, node); err != nil {
		b.add("datastore/error.txt", []byte(err.Error()+"\n"))
		fmt.Fprintf(o.Stdout, "Could not read the datastore: %v\n", err)
	}
	file := filepath.Join(dir, "diags-"+time.Now().Format("20060102_150405")+".tar.gz")
	if err := writeTarball(file, &b); err != nil {
		return err
	}
	fmt.Fprintf(o.Stdout, "\nDiags saved to %s\n", file)
	fmt.Fprintln(o.Stdout, "If required, you can upload the diagnostics bundle to a file sharing service.")
	return nil
}

// addLogs copies the files under the log directory into logs/.
func addLogs(b *bundle, dir string) int {
	n := 0
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !d.Type().IsRegular() {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		b.add(filepath.Join("logs", rel), data)
		n++
		return nil
	})
	return n
}

// addDatastore adds the objects about this node: its Node, the endpoints,
// BGP peers and Felix configuration bound to it, and its IPAM blocks and
// block affinities.
func addDatastore(ctx context.Context, o IO, ds *datastoreFlags, b *bundle, node string) error {
	c, err := connect(ctx, ds, o)
	if err != nil {
		return err
	}
	defer c.Close()
	onNode := func(r api.Resource) bool {
		m := map[string]any{}
		if j, err := json.Marshal(r); err == nil {
			_ = json.Unmarshal(j, &m)
		}
		return text(lookup(m, "spec.node")) == node
	}
	for _, sel := range []struct {
		kind, file string
		keep       func(api.Resource) bool
	}{
		{"Node", "datastore/node.yaml", func(r api.Resource) bool { return r.GetObjectMeta().Name == node }},
		{"WorkloadEndpoint", "datastore/workloadendpoints.yaml", onNode},
		{"HostEndpoint", "datastore/hostendpoints.yaml", onNode},
		{"BGPPeer", "datastore/bgppeers.yaml", onNode},
		{"FelixConfiguration", "datastore/felixconfiguration.yaml", func(r api.Resource) bool { return r.GetObjectMeta().Name == "node."+node }},
	} {
		k, _ := api.LookupKind(sel.kind)
		objs, rev, err := c.ListResources(ctx, k, "")
		if err != nil {
			return datastoreError(c, err)
		}
		var keep []api.Resource
		for _, r := range objs {
			if sel.keep(r) {
				keep = append(keep, r)
			}
		}
		raws, err := encodeObjects(keep)
		if err != nil {
			return err
		}
		y, err := toYAML(listObject(k, raws, rev))
		if err != nil {
			return err
		}
		b.add(sel.file, y)
	}
	affs, err := dumpObjects(ctx, c, store.ListOptions{Kind: store.KindBlockAffinity, Node: node})
	if err != nil {
		return datastoreError(c, err)
	}
	blocks, err := dumpObjects(ctx, c, store.ListOptions{Kind: store.KindIPAMBlock})
	if err != nil {
		return datastoreError(c, err)
	}
	var mine []dumped
	for _, kv := range blocks {
		var blk struct {
			Affinity *string `json:"affinity"`
		}
		if json.Unmarshal(kv.Value, &blk) == nil && blk.Affinity != nil && *blk.Affinity == "host:"+node {
			mine = append(mine, kv)
		}
	}
	for _, part := range []struct {
		file string
		kvs  []dumped
	}{{"datastore/ipam-affinities.yaml", affs}, {"datastore/ipam-blocks.yaml", mine}} {
		y, err := kvsYAML(part.kvs)
		if err != nil {
			return err
		}
		b.add(part.file, y)
	}
	return nil
}

// dumped is one stored object as diags shows it: its key in the datastore
// (Calico's etcd key on etcd) and its JSON value.
type dumped struct {
	Key   string
	Value []byte
}

// dumpObjects reads what opts selects, named as the datastore names it.
func dumpObjects(ctx context.Context, c *store.Client, opts store.ListOptions) ([]dumped, error) {
	objs, _, err := c.List(ctx, opts)
	if err != nil {
		return nil, err
	}
	_, onEtcd := etcdv3.Of(c.Backend)
	out := make([]dumped, 0, len(objs))
	for _, o := range objs {
		name := o.Key.String()
		if onEtcd {
			if name, err = etcdv3.EtcdKey(o.Key); err != nil {
				return nil, err
			}
		}
		out = append(out, dumped{Key: name, Value: o.Value})
	}
	return out, nil
}

// kvsYAML renders stored keys and their JSON values as a YAML list.
func kvsYAML(kvs []dumped) ([]byte, error) {
	items := make([]map[string]any, 0, len(kvs))
	for _, kv := range kvs {
		items = append(items, map[string]any{"key": kv.Key, "value": json.RawMessage(kv.Value)})
	}
	return toYAML(items)
}

func toYAML(v any) ([]byte, error) {
	j, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return yaml.JSONToYAML(j)
}

// writeTarball writes the bundle as a .tar.gz with its members under
// diagnostics/.
func writeTarball(file string, b *bundle) error {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	now := time.Now()
	for _, name := range b.names {
		data := b.data[name]
		hdr := &tar.Header{Name: "diagnostics/" + name, Mode: 0o644, Size: int64(len(data)), ModTime: now, Typeflag: tar.TypeReg}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if _, err := tw.Write(data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	if err := os.WriteFile(file, buf.Bytes(), 0o600); err != nil {
		return fmt.Errorf("writing %s: %w", file, err)
	}
	return nil
}
