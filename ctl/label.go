package ctl

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/calico-aio/calico-aio/store"
	"github.com/calico-aio/calico-aio/store/api"
)

const labelUsage = `Usage:
  calicoctl label (<KIND> <NAME>
                  ( <key>=<value> [--overwrite] |
                    <key> --remove )
                  [--config=<CONFIG>] [--namespace=<NS>])`

// runLabel is "calicoctl label KIND NAME key=value [--overwrite]" and
// "calicoctl label KIND NAME key --remove", for every kind; messages as
// calicoctl's, which name the kind as the user typed it.
func runLabel(o IO, args []string) error {
	fs := newFlagSet("label", o)
	var ds datastoreFlags
	ds.register(fs)
	ns := fs.StringP("namespace", "n", "", "namespace of namespaced resources (default \"default\")")
	overwrite := fs.Bool("overwrite", false, "replace the value of a key that is already present")
	remove := fs.Bool("remove", false, "remove the key (an error when it is absent)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	rest := fs.Args()
	if len(rest) != 3 || (*overwrite && *remove) {
		return usageError(o, labelUsage)
	}
	kindArg, name, kv := rest[0], rest[1], rest[2]
	key, value := kv, ""
	if !*remove {
		parts := strings.Split(kv, "=")
		if len(parts) != 2 {
			return fmt.Errorf("invalid label %s", kv)
		}
		key, value = parts[0], parts[1]
	}
	k, ok := api.LookupKind(kindArg)
	if !ok {
		return fmt.Errorf("resource type %q is not supported", kindArg)
	}
	namespace := kindNamespace(k, *ns)
	ctx := context.Background()
	c, err := connect(ctx, &ds, o)
	if err != nil {
		return err
	}
	defer c.Close()
	r, err := c.GetResource(ctx, k, namespace, name)
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("%s %s not found", kindArg, name)
	}
	if err != nil {
		return fmt.Errorf("failed to get %s %s, error %v", kindArg, name, datastoreError(c, err))
	}
	m := r.GetObjectMeta()
	if m.Labels == nil {
		m.Labels = map[string]string{}
	}
	old, present := m.Labels[key]
	verb := "set"
	switch {
	case *remove && !present:
		return fmt.Errorf("cannot remove label of %s %s, key %s does not exist", kindArg, name, key)
	case *remove:
		delete(m.Labels, key)
		verb = "removed"
	case present && !*overwrite && old != value:
		return fmt.Errorf("failed to update label of %s %s, key %s is already present. please use '--overwrite' to set a new value.", kindArg, name, key)
	case present:
		m.Labels[key] = value
		verb = "updated"
	default:
		m.Labels[key] = value
	}
	if len(m.Labels) == 0 {
		m.Labels = nil
	}
	// The write is a compare-and-swap on the revision just read.
	if _, err := c.UpdateResource(ctx, r); err != nil {
		return fmt.Errorf("failed to update %s %s, label not changed: %v", kindArg, name, datastoreError(c, describeStoreError(r, err)))
	}
	switch verb {
	case "removed":
		fmt.Fprintf(o.Stdout, "Successfully removed label %s from %s %s\n", key, kindArg, name)
	default:
		fmt.Fprintf(o.Stdout, "Successfully %s label %s on %s %s\n", verb, key, kindArg, name)
	}
	return nil
}
