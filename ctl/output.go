package ctl

import (
	"fmt"
	"io"
	"os"
	"reflect"
	"sort"
	"strings"
	"text/template"

	"github.com/calico-aio/calico-aio/store/api"
)

// outputFormat is a parsed -o value.
type outputFormat struct {
	name     string   // ps, wide, yaml, json, custom-columns, go-template
	columns  []string // custom-columns headings
	template string   // go-template text (or the file's)
}

// parseOutput reads -o as calicoctl does: ps, wide, yaml, json,
// custom-columns=H1,H2,..., go-template=TEMPLATE, go-template-file=FILE.
func parseOutput(s string) (outputFormat, error) {
	switch s {
	case "ps", "wide", "yaml", "json":
		return outputFormat{name: s}, nil
	}
	name, arg, ok := strings.Cut(s, "=")
	switch {
	case ok && name == "custom-columns" && arg != "":
		var cols []string
		for _, c := range strings.Split(arg, ",") {
			cols = append(cols, strings.ToUpper(strings.TrimSpace(c)))
		}
		return outputFormat{name: name, columns: cols}, nil
	case ok && name == "go-template" && arg != "":
		return outputFormat{name: name, template: arg}, nil
	case ok && name == "go-template-file" && arg != "":
		b, err := os.ReadFile(arg)
		if err != nil {
			return outputFormat{}, fmt.Errorf("go-template-file: %w", err)
		}
		return outputFormat{name: "go-template", template: string(b)}, nil
	}
	return outputFormat{}, fmt.Errorf("unrecognized output format '%s': use ps, wide, yaml, json, custom-columns=..., go-template=... or go-template-file=...", s)
}

// customTable is the table of the named headings, each one a column of the
// kind's ps or wide table (calicoctl's names).
func customTable(k api.KindInfo, headings []string, allNamespaces bool) (table, error) {
	known := map[string]column{colName.header: colName, colNamespace.header: colNamespace}
	var names []string
	if t, ok := tables()[k.Kind]; ok {
		for _, set := range t {
			for _, c := range set {
				known[c.header] = c
			}
		}
	}
	for h := range known {
		names = append(names, h)
	}
	sort.Strings(names)
	var cols []column
	for _, h := range headings {
		c, ok := known[h]
		if !ok {
			return table{}, fmt.Errorf("custom-columns: unknown column %q for %s: use one of %s", h, k.Kind, strings.Join(names, ", "))
		}
		cols = append(cols, c)
	}
	if allNamespaces && (len(cols) == 0 || cols[0].header != colNamespace.header) {
		cols = append([]column{colNamespace}, cols...)
	}
	return table{cols: cols}, nil
}

// printTemplate runs a go-template over the list of objects, as calicoctl
// does: the data is the list, each object seen with its Go field names
// (.ObjectMeta.Name or .Name, .Spec.CIDR, ...) and also its JSON names
// (.metadata.name, .spec.cidr); join, joinAndTruncate and config are there.
func printTemplate(w io.Writer, text string, objs []api.Resource, asNumber func() string) error {
	fns := template.FuncMap{
		"join":            func(items any, sep string) string { return joinAndTruncate(items, sep, 0) },
		"joinAndTruncate": joinAndTruncate,
		"config": func(name string) (string, error) {
			if strings.EqualFold(name, "asnumber") {
				return asNumber(), nil
			}
			return "", fmt.Errorf("config %q: only asnumber is known", name)
		},
	}
	tmpl, err := template.New("get").Funcs(fns).Parse(text)
	if err != nil {
		return fmt.Errorf("go-template: %w", err)
	}
	views := make([]any, len(objs))
	for i, r := range objs {
		views[i] = templateView(reflect.ValueOf(r))
	}
	if err := tmpl.Execute(w, views); err != nil {
		return fmt.Errorf("go-template: %w", err)
	}
	return nil
}

// templateView turns a resource into maps keyed by Go field name and JSON
// name; embedded structs are promoted, and Metadata is also ObjectMeta with
// its fields promoted (as in Calico's types, which embed it).
func templateView(v reflect.Value) any {
	for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		if v.IsNil() {
			return nil
		}
		v = v.Elem()
	}
	switch v.Kind() {
	case reflect.Struct:
		out := map[string]any{}
		addFields(out, v)
		return out
	case reflect.Slice, reflect.Array:
		if v.Kind() == reflect.Slice && v.IsNil() {
			return nil
		}
		items := make([]any, v.Len())
		for i := range items {
			items[i] = templateView(v.Index(i))
		}
		return items
	}
	return v.Interface()
}

func addFields(out map[string]any, v reflect.Value) {
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		fv := v.Field(i)
		if f.Anonymous && fv.Kind() == reflect.Struct {
			addFields(out, fv)
			continue
		}
		view := templateView(fv)
		out[f.Name] = view
		if tag, _, _ := strings.Cut(f.Tag.Get("json"), ","); tag != "" && tag != "-" {
			out[tag] = view
		}
		if f.Type == reflect.TypeFor[api.ObjectMeta]() {
			out["ObjectMeta"] = view
			for k, mv := range view.(map[string]any) {
				if _, taken := out[k]; !taken {
					out[k] = mv
				}
			}
		}
	}
}

// joinAndTruncate joins a list's (or a map's sorted key=value) items with
// sep, cut to maxLen with "..." when maxLen > 0.
func joinAndTruncate(items any, sep string, maxLen int) string {
	if items == nil {
		return ""
	}
	var parts []string
	v := reflect.ValueOf(items)
	switch v.Kind() {
	case reflect.Map:
		for _, k := range v.MapKeys() {
			parts = append(parts, fmt.Sprintf("%v=%v", k.Interface(), v.MapIndex(k).Interface()))
		}
		sort.Strings(parts)
	case reflect.Slice, reflect.Array:
		for i := 0; i < v.Len(); i++ {
			parts = append(parts, fmt.Sprint(v.Index(i).Interface()))
		}
	default:
		parts = []string{fmt.Sprint(items)}
	}
	s := strings.Join(parts, sep)
	if maxLen > 0 && len(s) > maxLen {
		s = s[:max(maxLen-3, 0)] + "..."
	}
	return s
}
