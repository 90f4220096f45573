package ctl

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"

	"sigs.k8s.io/yaml"

	"github.com/calico-aio/calico-aio/store"
	"github.com/calico-aio/calico-aio/store/api"
	"github.com/calico-aio/calico-aio/store/etcdv3"
)

// calicoctl datastore migrate: move a cluster's Calico data from an etcdv3
// datastore to a Kubernetes one, as Calico's calicoctl does. lock sets
// ClusterInformation "default" spec.datastoreReady false (Calico's
// components stop changing the dataplane and the CNI plugin refuses pods),
// export prints every Calico resource and every IPAM object of the locked
// source, import writes them into an empty target, unlock sets
// datastoreReady true there. docs/DATASTORE.md "Moving from etcd to
// Kubernetes" has the steps.

// migrateSubcommands are the verbs of calicoctl datastore migrate.
var migrateSubcommands = map[string]bool{"export": true, "import": true, "lock": true, "unlock": true}

// notLockedExport is what export says of a source that is not locked.
const notLockedExport = "Datastore is not locked. Run the `calicoctl datastore migrate lock` command in order to begin migration."

// derivedKinds are the kinds a Kubernetes datastore derives from
// Kubernetes objects (Pods, Namespaces, ServiceAccounts): they are not
// exported. Nodes are exported and imported onto existing Kubernetes Nodes.
var derivedKinds = map[string]bool{"WorkloadEndpoint": true, "Profile": true}

// migrateUsage is what "calicoctl datastore migrate --help" prints.
const migrateUsage = `Usage:
  calicoctl datastore migrate <command> [<args>...]

    export  Export the contents of the etcdv3 datastore to yaml.
    import  Store and convert yaml of resources into the Kubernetes datastore.
    lock    Lock the datastore to prevent changes from occurring during datastore migration.
    unlock  Unlock the datastore to allow changes once the migration is completed.

See 'calicoctl datastore migrate <command> --help' to read about a specific subcommand.`

func runDatastore(o IO, args []string) error {
	if len(args) < 2 || args[0] != "migrate" || !migrateSubcommands[args[1]] {
		if slices.Contains(args, "-h") || slices.Contains(args, "--help") {
			fmt.Fprintln(o.Stdout, migrateUsage)
			return nil
		}
		fmt.Fprintln(o.Stderr, migrateUsage)
		return exitError{code: 1}
	}
	fs := newFlagSet("datastore migrate "+args[1], o)
	var ds datastoreFlags
	ds.register(fs)
	var file *string
	if args[1] == "import" {
		file = fs.StringP("filename", "f", "", "the file an export was saved to (- for standard input)")
	}
	if err := fs.Parse(args[2:]); err != nil {
		return err
	}
	if len(fs.Args()) > 0 {
		return fmt.Errorf("calicoctl datastore migrate %s: unexpected argument %q", args[1], fs.Args()[0])
	}
	ctx := context.Background()
	c, err := connect(ctx, &ds, o)
	if err != nil {
		return err
	}
	defer c.Close()
	switch args[1] {
	case "lock", "unlock":
		err = setDatastoreReady(ctx, c, args[1] == "unlock")
		if err == nil {
			fmt.Fprintf(o.Stdout, "Datastore %sed.\n", args[1])
		}
	case "export":
		err = migrateExport(ctx, c, o.Stdout, o.Stderr)
	case "import":
		err = importFile(ctx, c, o, *file)
	}
	if err != nil {
		return datastoreError(c, err)
	}
	return nil
}

// setDatastoreReady sets ClusterInformation default spec.datastoreReady,
// keeping every other field (compare-and-swap on the read revision).
func setDatastoreReady(ctx context.Context, c *store.Client, ready bool) error {
	k, _ := api.LookupKind("ClusterInformation")
	for range maxClusterInfoWrites {
		r, err := c.GetResource(ctx, k, "", "default")
		if errors.Is(err, store.ErrNotFound) {
			return errors.New("the datastore has no ClusterInformation default: start calico-node on it first")
		}
		if err != nil {
			return err
		}
		ci := r.(*api.ClusterInformation)
		ci.Spec.DatastoreReady = &ready
		_, err = c.UpdateResource(ctx, ci)
		if !errors.Is(err, store.ErrConflict) {
			return err
		}
	}
	return fmt.Errorf("ClusterInformation default: gave up after %d conflicting writes", maxClusterInfoWrites)
}

// maxClusterInfoWrites bounds setDatastoreReady's retries.
const maxClusterInfoWrites = 5

// datastoreLocked reports whether ClusterInformation default says the
// datastore is not ready (locked for migration).
func datastoreLocked(ctx context.Context, c *store.Client) (bool, error) {
	k, _ := api.LookupKind("ClusterInformation")
	r, err := c.GetResource(ctx, k, "", "default")
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	ready := r.(*api.ClusterInformation).Spec.DatastoreReady
	return ready != nil && !*ready, nil
}

// migrateExport writes the locked datastore's resources (YAML documents,
// exactly as stored but for node names, nodeRenames) and then its IPAM
// objects to w; what it leaves out that a user made goes to warn.
func migrateExport(ctx context.Context, c *store.Client, w, warn io.Writer) error {
	locked, err := datastoreLocked(ctx, c)
	if err != nil {
		return err
	}
	if !locked {
		return errors.New(notLockedExport)
	}
	if _, isEtcd := etcdv3.Of(c.Backend); !isEtcd {
		return errors.New("Invalid datastore type: kubernetes to export from for datastore migration. Datastore type must be etcdv3")
	}
	renames, err := nodeRenames(ctx, c)
	if err != nil {
		return err
	}
	if err := warnSkippedProfiles(ctx, c, warn); err != nil {
		return err
	}
	bw := bufio.NewWriter(w)
	for _, k := range api.Kinds() {
		if derivedKinds[k.Kind] || k.Kind == "ClusterInformation" {
			continue
		}
		if err := exportKind(ctx, c, bw, k.Kind, renames); err != nil {
			return err
		}
	}
	fmt.Fprintln(bw, exportSeparator)
	if err := writeClusterInfo(ctx, c, bw); err != nil {
		return err
	}
	fmt.Fprintln(bw, exportSeparator)
	if err := writeIPAM(ctx, c, bw, renames); err != nil {
		return err
	}
	return bw.Flush()
}

// listRenamed lists every stored object of kind, node names renamed,
// in export order.
func listRenamed(ctx context.Context, c *store.Client, kind string, renames map[string]string) ([]store.Object, error) {
	objs, _, err := c.List(ctx, store.ListOptions{Kind: kind})
	if err != nil {
		return nil, fmt.Errorf("exporting %s: %w", kind, err)
	}
	for i := range objs {
		if err := renameObject(&objs[i], renames); err != nil {
			return nil, err
		}
	}
	sortObjects(objs)
	return objs, nil
}

// exportKind writes every stored object of kind as a YAML document.
func exportKind(ctx context.Context, c *store.Client, w io.Writer, kind string, renames map[string]string) error {
	objs, err := listRenamed(ctx, c, kind, renames)
	if err != nil {
		return err
	}
	for i := range objs {
		if err := editValue(&objs[i], clearServerMeta); err != nil {
			return err
		}
	}
	for _, o := range objs {
		y, err := yaml.JSONToYAML(o.Value)
		if err != nil {
			return fmt.Errorf("exporting %s: %w", o.Key, err)
		}
		fmt.Fprintf(w, "---\n%s", y)
	}
	return nil
}

// clearServerMeta drops what a datastore sets on write (uid,
// creationTimestamp), as Calico's export does: the target sets its own.
func clearServerMeta(v map[string]any) {
	if m, ok := v["metadata"].(map[string]any); ok {
		delete(m, "uid")
		delete(m, "creationTimestamp")
		delete(m, "resourceVersion")
	}
}

func sortObjects(objs []store.Object) {
	sort.Slice(objs, func(i, j int) bool {
		a, b := objs[i].Key, objs[j].Key
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		if a.Node != b.Node {
			return a.Node < b.Node
		}
		return a.Name < b.Name
	})
}
