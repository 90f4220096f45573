package ctl

import (
	"fmt"

	"github.com/calico-aio/calico-aio/store/api"
)

// runValidate is "calicoctl validate -f FILE [-R] [--skip-empty]": it
// checks resources offline (defaults, field validation, overlaps among the
// file's own IP pools) without a datastore, in order, stopping at the first
// invalid one, with calicoctl's messages.
func runValidate(o IO, args []string) error {
	fs := newFlagSet("validate", o)
	var ds datastoreFlags
	ds.register(fs) // accepted like every command's, never used: validate is offline
	file := fs.StringP("filename", "f", "", "file with the resources (\"-\" for stdin; a directory: its .json, .yaml and .yml files)")
	recursive := fs.BoolP("recursive", "R", false, "with a directory -f, also its subdirectories")
	skipEmpty := fs.Bool("skip-empty", false, "do not fail on files without resources")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *file == "" || len(fs.Args()) > 0 {
		return usageError(o, "Usage:\n  calicoctl validate --filename=<FILENAME> [--recursive] [--skip-empty]")
	}
	batches, loadErr := loadFiles(o, *file, *recursive, *skipEmpty, "")
	for _, docs := range batches {
		if err := validateBatch(o, docs); err != nil {
			return err
		}
	}
	return loadErr
}

func validateBatch(o IO, docs []document) error {
	kind := kindPhrase(docs)
	var pools []*api.IPPool
	for i, d := range docs {
		err := validateOffline(d.res, pools)
		if err == nil {
			if p, ok := d.res.(*api.IPPool); ok {
				pools = append(pools, p)
			}
			continue
		}
		err = fmt.Errorf("%s: %w", resourceID(d.res), err)
		switch {
		case i > 0 && kind != "":
			fmt.Fprintf(o.Stdout, "Partial success: validated the first %d out of %d %sresources:\n", i, len(docs), kind)
			return fmt.Errorf("hit error(s): [%v]", err)
		case i > 0:
			fmt.Fprintf(o.Stdout, "Partial success: validated the first %d out of %d resources:\n", i, len(docs))
			return fmt.Errorf("hit error(s): [%v]", err)
		case len(docs) == 1:
			return fmt.Errorf("failed to validate %sresource: [%v]", kind, err)
		case kind != "":
			return fmt.Errorf("failed to validate any %sresources: [%v]", kind, err)
		default:
			return fmt.Errorf("failed to validate any resources: [%v]", err)
		}
	}
	fmt.Fprintf(o.Stdout, "Successfully validated %d %sresource(s)\n", len(docs), kind)
	return nil
}

// validateOffline is the part of a write's checks that needs no datastore.
func validateOffline(r api.Resource, pools []*api.IPPool) error {
	r.Default()
	if err := r.Validate(); err != nil {
		return err
	}
	if p, ok := r.(*api.IPPool); ok {
		return api.CheckPoolOverlap(p, pools)
	}
	return nil
}
