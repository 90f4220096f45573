package ctl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"sigs.k8s.io/yaml"

	"github.com/calico-aio/calico-aio/store"
	"github.com/calico-aio/calico-aio/store/api"
)

// runPatch is "calicoctl patch KIND NAME -p PATCH [--type strategic|merge]":
// a JSON merge patch (RFC 7386) applied to the stored object and written
// back with compare-and-swap on the revision read. For Calico's types a
// strategic merge patch is the same thing (they carry no patch strategies).
func runPatch(o IO, args []string) error {
	fs := newFlagSet("patch", o)
	var ds datastoreFlags
	ds.register(fs)
	patch := fs.StringP("patch", "p", "", "the patch, as JSON or YAML")
	typ := fs.StringP("type", "t", "strategic", "patch type: strategic (default) or merge; json (RFC 6902) is not implemented, as in calicoctl")
	ns := fs.StringP("namespace", "n", "", "namespace of namespaced resources (default \"default\")")
	if err := fs.Parse(args); err != nil {
		return err
	}
	rest := fs.Args()
	if len(rest) != 2 || *patch == "" {
		return usageError(o, "Usage:\n  calicoctl patch <KIND> <NAME> --patch=<PATCH> [--type=<TYPE>] [--config=<CONFIG>] [--namespace=<NS>]")
	}
	switch *typ {
	case "strategic", "merge":
	case "json":
		return fmt.Errorf("patch type %q (JSON Patch, RFC 6902) is not implemented; use strategic or merge", *typ)
	default:
		return fmt.Errorf("unknown patch type %q: use strategic or merge", *typ)
	}
	k, ok := api.LookupKind(rest[0])
	if !ok {
		return fmt.Errorf("resource type %q is not supported", rest[0])
	}
	p, err := parsePatch(*patch)
	if err != nil {
		return fmt.Errorf("failed to parse the patch: %w", err)
	}
	if err := api.CheckKnownPatch(k.Kind, p); err != nil {
		return err // calicoctl's message alone (api.UnknownFieldError)
	}
	namespace := kindNamespace(k, *ns)
	ctx := context.Background()
	c, err := connect(ctx, &ds, o)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := patchOne(ctx, c, k, namespace, rest[1], p); err != nil {
		fmt.Fprintf(o.Stderr, "Failed to patch '%s' resource: %v\n", k.Kind, datastoreError(c, err))
		return exitError{code: 1}
	}
	fmt.Fprintf(o.Stdout, "Successfully patched 1 '%s' resource\n", k.Kind)
	return nil
}

// parsePatch reads the patch as a JSON (or YAML) object.
func parsePatch(s string) (map[string]any, error) {
	j, err := yaml.YAMLToJSON([]byte(s))
	if err != nil {
		return nil, fmt.Errorf("invalid JSON or YAML: %w", err)
	}
	var m map[string]any
	if err := json.Unmarshal(j, &m); err != nil || m == nil {
		return nil, fmt.Errorf("the patch %q is not a JSON object", s)
	}
	return m, nil
}

// patchOne applies p to the stored object and writes it back at the
// revision it was read at (or at the one the patch names).
func patchOne(ctx context.Context, c *store.Client, k api.KindInfo, ns, name string, p map[string]any) error {
	probe := k.NewObject()
	probe.GetObjectMeta().Name, probe.GetObjectMeta().Namespace = name, ns
	cur, err := c.GetResource(ctx, k, ns, name)
	if err != nil {
		return describeStoreError(probe, err)
	}
	raw, err := api.Marshal(cur)
	if err != nil {
		return fmt.Errorf("%s: %w", resourceID(cur), err)
	}
	var doc any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return err
	}
	merged, err := json.Marshal(mergePatch(doc, p))
	if err != nil {
		return err
	}
	next, err := api.Decode(merged)
	if err != nil {
		return fmt.Errorf("the patched object does not decode: %w", err)
	}
	if err := sameIdentity(cur, next); err != nil {
		return err
	}
	if _, err := c.UpdateResource(ctx, next); err != nil {
		return describeStoreError(next, err)
	}
	return nil
}

// sameIdentity refuses a patch that renames or moves the object.
func sameIdentity(cur, next api.Resource) error {
	cm, nm := cur.GetObjectMeta(), next.GetObjectMeta()
	switch {
	case next.GetTypeMeta().Kind != cur.GetTypeMeta().Kind:
		return errors.New("kind: a patch cannot change the kind")
	case nm.Name != cm.Name:
		return fmt.Errorf("metadata.name: a patch cannot rename %s", resourceID(cur))
	case nm.Namespace != cm.Namespace:
		return fmt.Errorf("metadata.namespace: a patch cannot move %s", resourceID(cur))
	}
	return nil
}

// mergePatch applies an RFC 7386 JSON merge patch: objects merge member by
// member, null deletes, anything else replaces.
func mergePatch(target any, patch any) any {
	pm, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	tm, ok := target.(map[string]any)
	if !ok {
		tm = map[string]any{}
	}
	for key, pv := range pm {
		if pv == nil {
			delete(tm, key)
			continue
		}
		tm[key] = mergePatch(tm[key], pv)
	}
	return tm
}
