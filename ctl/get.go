package ctl

import (
	"context"
	"encoding/json"
	"fmt"

	"sigs.k8s.io/yaml"

	"github.com/calico-aio/calico-aio/store"
	"github.com/calico-aio/calico-aio/store/api"
)

func runGet(o IO, args []string) error {
	fs := newFlagSet("get", o)
	var ds datastoreFlags
	ds.register(fs)
	output := fs.StringP("output", "o", "ps", "output format: ps, wide, yaml, json, custom-columns=H1,H2,..., go-template=TEMPLATE or go-template-file=FILE")
	ns := fs.StringP("namespace", "n", "", "namespace (default \"default\")")
	all := fs.BoolP("all-namespaces", "A", false, "list namespaced resources of every namespace")
	if err := fs.Parse(args); err != nil {
		return err
	}
	rest := fs.Args()
	if len(rest) == 0 {
		return fmt.Errorf("usage: calicoctl get KIND [NAME...] [-o ps|wide|yaml|json] [-n NS | -A]")
	}
	format, err := parseOutput(*output)
	if err != nil {
		return err
	}
	k, ok := api.LookupKind(rest[0])
	if !ok {
		return fmt.Errorf("resource type %q is not supported", rest[0])
	}
	namespace := *ns
	if k.Namespaced && namespace == "" && !*all {
		namespace = "default"
	}
	if *all {
		namespace = ""
	}
	ctx := context.Background()
	c, err := connect(ctx, &ds, o)
	if err != nil {
		return err
	}
	defer c.Close()

	var objs []api.Resource
	var listRev store.Revision
	names := rest[1:]
	if len(names) == 0 {
		if objs, listRev, err = c.ListResources(ctx, k, namespace); err != nil {
			return datastoreError(c, err)
		}
	} else {
		namespace = kindNamespace(k, namespace)
		for _, name := range names {
			r, err := c.GetResource(ctx, k, namespace, name)
			if err != nil {
				probe := k.NewObject()
				probe.GetObjectMeta().Name, probe.GetObjectMeta().Namespace = name, namespace
				return datastoreError(c, describeStoreError(probe, err))
			}
			objs = append(objs, r)
		}
	}

	switch format.name {
	case "go-template":
		return printTemplate(o.Stdout, format.template, objs, func() string { return defaultASN(ctx, c) })
	case "custom-columns":
		t, err := customTable(k, format.columns, k.Namespaced && *all)
		if err != nil {
			return err
		}
		ext := tableContext{defaultASN: defaultASN(ctx, c)}
		return t.print(o.Stdout, objs, ext)
	case "yaml", "json":
		raws, err := encodeObjects(objs)
		if err != nil {
			return err
		}
		var v any = listObject(k, raws, listRev)
		if len(names) == 1 {
			v = raws[0]
		}
		return printStructured(o, format.name, v)
	}
	t := tableFor(k, *output == "wide", k.Namespaced && *all)
	ext := tableContext{}
	if k.Kind == "Node" && *output == "wide" {
		ext.defaultASN = defaultASN(ctx, c)
	}
	return t.print(o.Stdout, objs, ext)
}

// encodeObjects renders each object with the stored fields our types do
// not model (api.Marshal), so that get, edit and apply keep them.
func encodeObjects(objs []api.Resource) ([]json.RawMessage, error) {
	out := make([]json.RawMessage, len(objs))
	for i, r := range objs {
		b, err := api.Marshal(r)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", resourceID(r), err)
		}
		out[i] = b
	}
	return out, nil
}

// listObject is the <Kind>List wrapper calicoctl prints for several objects.
func listObject(k api.KindInfo, objs []json.RawMessage, rev store.Revision) map[string]any {
	items := make([]any, len(objs))
	for i, r := range objs {
		items[i] = r
	}
	meta := map[string]any{}
	if rev != "" {
		meta["resourceVersion"] = string(rev)
	}
	return map[string]any{
		"apiVersion": api.APIVersion,
		"kind":       k.Kind + "List",
		"items":      items,
		"metadata":   meta,
	}
}

func printStructured(o IO, format string, v any) error {
	j, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if format == "json" {
		fmt.Fprintln(o.Stdout, string(j))
		return nil
	}
	y, err := yaml.JSONToYAML(j)
	if err != nil {
		return err
	}
	_, err = o.Stdout.Write(y)
	return err
}
