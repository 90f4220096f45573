package ctl

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/calico-aio/calico-aio/build/version"
	"github.com/calico-aio/calico-aio/store"
	"github.com/calico-aio/calico-aio/store/api"
	"github.com/calico-aio/calico-aio/store/etcdv3"
)

type writeOp struct {
	verb string // "create"
	past string // "created"
}

var (
	opCreate  = writeOp{"create", "created"}
	opApply   = writeOp{"apply", "applied"}
	opReplace = writeOp{"replace", "replaced"}
	opDelete  = writeOp{"delete", "deleted"}
)

// resourceID names an object the way Calico's errors do: IPPool(name) or
// WorkloadEndpoint(namespace/name).
func resourceID(r api.Resource) string {
	m := r.GetObjectMeta()
	if m.Namespace != "" {
		return fmt.Sprintf("%s(%s/%s)", r.GetTypeMeta().Kind, m.Namespace, m.Name)
	}
	return fmt.Sprintf("%s(%s)", r.GetTypeMeta().Kind, m.Name)
}

func describeStoreError(r api.Resource, err error) error {
	id := resourceID(r)
	switch {
	case errors.Is(err, store.ErrAlreadyExists):
		return fmt.Errorf("resource already exists: %s", id)
	case errors.Is(err, store.ErrNotFound):
		return fmt.Errorf("resource does not exist: %s", id)
	case errors.Is(err, store.ErrConflict):
		return fmt.Errorf("update conflict: %s: the resource was modified, re-read it and try again", id)
	}
	return fmt.Errorf("%s: %w", id, err)
}

func runWrite(o IO, op writeOp, args []string) error {
	fs := newFlagSet(op.verb, o)
	var ds datastoreFlags
	ds.register(fs)
	file := fs.StringP("filename", "f", "", "file with the resources (\"-\" for stdin; a directory: its .json, .yaml and .yml files)")
	recursive := fs.BoolP("recursive", "R", false, "with a directory -f, also its subdirectories")
	skipEmpty := fs.Bool("skip-empty", false, "do not fail on files without resources")
	ns := fs.StringP("namespace", "n", "", "namespace of namespaced resources (default \"default\")")
	var skipExists, skipNotExists bool
	if op == opCreate {
		fs.BoolVar(&skipExists, "skip-exists", false, "do not fail when a resource already exists")
	}
	if op == opDelete {
		fs.BoolVar(&skipNotExists, "skip-not-exists", false, "do not fail when a resource does not exist")
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	// With a directory, the files before a bad one are still handled (as
	// calicoctl does, terminating at the first failure).
	batches, loadErr := writeTargets(o, op, *file, *recursive, *skipEmpty, *ns, fs.Args())
	if len(batches) == 0 && loadErr != nil {
		return loadErr
	}
	ctx := context.Background()
	c, err := connect(ctx, &ds, o)
	if err != nil {
		return err
	}
	defer c.Close()
	// A directory is handled file by file, stopping at the first failure.
	for _, docs := range batches {
		if op != opDelete {
			if err := validateAll(ctx, c, docs); err != nil {
				return datastoreError(c, err)
			}
			if err := ensureInitialized(ctx, c); err != nil {
				return datastoreError(c, err)
			}
		}
		done := 0
		for _, d := range docs {
			err := writeOne(ctx, c, op, d.res)
			switch {
			case err == nil:
			case op == opCreate && skipExists && errors.Is(err, store.ErrAlreadyExists):
			case op == opDelete && skipNotExists && errors.Is(err, store.ErrNotFound):
			default:
				return reportFailure(o, op, docs, done, datastoreError(c, describeStoreError(d.res, err)))
			}
			done++
		}
		fmt.Fprintf(o.Stdout, "Successfully %s %d %sresource(s)\n", op.past, done, kindPhrase(docs))
	}
	return loadErr
}

// writeTargets reads the documents of -f, one batch per file, or for
// delete the KIND NAME... args.
func writeTargets(o IO, op writeOp, file string, recursive, skipEmpty bool, ns string, args []string) ([][]document, error) {
	if file == "" {
		if op != opDelete || len(args) < 2 {
			if op == opDelete {
				return nil, fmt.Errorf("usage: calicoctl delete (-f FILE | KIND NAME...)")
			}
			return nil, fmt.Errorf("usage: calicoctl %s -f FILE (\"-\" for stdin)", op.verb)
		}
		k, ok := api.LookupKind(args[0])
		if !ok {
			return nil, fmt.Errorf("resource type %q is not supported", args[0])
		}
		docs := make([]document, 0, len(args)-1)
		for i, name := range args[1:] {
			r := k.NewObject()
			r.GetObjectMeta().Name = name
			if err := setNamespace(r, ns); err != nil {
				return nil, err
			}
			docs = append(docs, document{index: i + 1, res: r})
		}
		return [][]document{docs}, nil
	}
	if len(args) > 0 {
		return nil, fmt.Errorf("unexpected arguments %q with -f", strings.Join(args, " "))
	}
	return loadFiles(o, file, recursive, skipEmpty, ns)
}

// loadFiles reads and decodes every file -f names, one batch per file. On
// a bad file it returns the batches before it with the error.
func loadFiles(o IO, file string, recursive, skipEmpty bool, ns string) ([][]document, error) {
	files, err := inputFiles(file, recursive)
	if err != nil {
		return nil, err
	}
	var batches [][]document
	for _, f := range files {
		data, err := readInput(f, o.Stdin)
		if err != nil {
			return nil, err
		}
		docs, err := loadResources(data, ns)
		if errors.Is(err, errNoResources) && skipEmpty {
			continue
		}
		var unknown *api.UnknownFieldError
		if errors.As(err, &unknown) {
			return batches, unknown // printed alone, as calicoctl does
		}
		if err != nil {
			if len(files) > 1 {
				err = fmt.Errorf("%s: %w", f, err)
			}
			return batches, fmt.Errorf("failed to execute command: %w", err)
		}
		batches = append(batches, docs)
	}
	if len(batches) == 0 && !skipEmpty {
		return nil, fmt.Errorf("failed to execute command: no resource files in %s", file)
	}
	return batches, nil
}

// validateAll validates every document (and overlaps among the input's own
// IP pools) before anything is written.
func validateAll(ctx context.Context, c *store.Client, docs []document) error {
	var errs []error
	var pools []*api.IPPool
	for _, d := range docs {
		if err := c.Prepare(ctx, d.res); err != nil {
			errs = append(errs, fmt.Errorf("document %d (%s): %w", d.index, resourceID(d.res), err))
			continue
		}
		if p, ok := d.res.(*api.IPPool); ok {
			if err := api.CheckPoolOverlap(p, pools); err != nil {
				errs = append(errs, fmt.Errorf("document %d (%s): %w", d.index, resourceID(d.res), err))
			}
			pools = append(pools, p)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("failed to validate the input, nothing was written:\n%w", errors.Join(errs...))
	}
	return nil
}

func writeOne(ctx context.Context, c *store.Client, op writeOp, r api.Resource) error {
	var err error
	switch op {
	case opCreate:
		_, err = c.CreateResource(ctx, r)
	case opApply:
		_, err = c.ApplyResource(ctx, r)
	case opReplace:
		_, err = c.UpdateResource(ctx, r)
	case opDelete:
		if n, ok := r.(*api.Node); ok {
			return deleteNode(ctx, c, n) // releases its IPAM too (node_delete.go)
		}
		_, err = c.DeleteObject(ctx, r)
	}
	return err
}

func reportFailure(o IO, op writeOp, docs []document, done int, err error) error {
	if done == 0 {
		fmt.Fprintf(o.Stderr, "Failed to %s %sresource: [%v]\n", op.verb, kindPhrase(docs), err)
	} else {
		fmt.Fprintf(o.Stderr, "Partial success: %s the first %d out of %d %sresources:\nHit error: %v\n",
			op.past, done, len(docs), kindPhrase(docs), err)
	}
	return exitError{code: 1}
}

// kindPhrase is "'IPPool' " when every document has that kind, else "".
func kindPhrase(docs []document) string {
	kind := ""
	for _, d := range docs {
		k := d.res.GetTypeMeta().Kind
		if kind != "" && k != kind {
			return ""
		}
		kind = k
	}
	return "'" + kind + "' "
}

// ensureInitialized is what calicoctl does before it writes, as Calico's:
// ClusterInformation default (clusterType "kdd" in a Kubernetes datastore,
// as recorded) and the default tiers default, kube-admin and kube-baseline.
func ensureInitialized(ctx context.Context, c *store.Client) error {
	var err error
	if _, onEtcd := etcdv3.Of(c.Backend); onEtcd {
		err = c.EnsureClusterInformation(ctx, version.Version)
	} else {
		err = c.EnsureClusterInformationOfType(ctx, version.Version, "kdd")
	}
	if err != nil {
		return err
	}
	return c.EnsureDefaultTiers(ctx)
}
