package ctl_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/calico-aio/calico-aio/internal/golden"

	"github.com/calico-aio/calico-aio/store/api"
	"github.com/calico-aio/calico-aio/store/storetest"
)

// transcript runs each command and records it as "$ calicoctl ...", its
// stdout, its stderr and its exit code, for a golden file.
func (h *harness) transcript(cmds ...[]string) string {
	h.t.Helper()
	var b strings.Builder
	for _, c := range cmds {
		out, errs, code := h.run("", c...)
		fmt.Fprintf(&b, "$ calicoctl %s\n%s", strings.Join(c, " "), out)
		if errs != "" {
			fmt.Fprintf(&b, "[stderr] %s", errs)
		}
		fmt.Fprintf(&b, "[exit %d]\n", code)
	}
	return b.String()
}

func TestPatch(t *testing.T) {
	h := newHarness(t)
	h.mustRun("", "apply", "-f", "testdata/all-kinds.yaml")
	got := h.transcript(
		[]string{"patch", "node", "node-1", "-p", `{"spec":{"bgp":{"routeReflectorClusterID":"224.0.0.1"}}}`},
		[]string{"patch", "ippool", "pool-a", "--patch", `{"spec":{"natOutgoing":false,"disabled":true}}`, "--type", "merge"},
		[]string{"patch", "networkpolicy", "allow-web", "-n", "default", "-p", `{"metadata":{"labels":{"team":"web"}}}`},
		[]string{"get", "ippool", "-o", "wide"},
		[]string{"patch", "ippool", "pool-a", "-p", `{"spec":{"blockSize":99}}`},
		[]string{"patch", "ippool", "nope", "-p", `{"spec":{"disabled":true}}`},
		[]string{"patch", "ippool", "pool-a", "-p", `{"metadata":{"name":"other"}}`},
		[]string{"patch", "ippool", "pool-a", "-p", `not json`},
		// A resourceVersion in the patch is a precondition (compare-and-swap).
		[]string{"patch", "ippool", "pool-a", "-p", `{"metadata":{"resourceVersion":"2"},"spec":{"disabled":false}}`},
		[]string{"patch", "ippool", "pool-a", "-p", `[]`, "--type", "json"},
		[]string{"patch", "ippool", "pool-a"},
		[]string{"patch", "gadget", "x", "-p", `{}`},
	)
	golden.Check(t, "patch", got)

	r, err := h.cli.GetResource(t.Context(), mustKind(t, "Node"), "", "node-1")
	if err != nil {
		t.Fatal(err)
	}
	if id := r.(*api.Node).Spec.BGP.RouteReflectorClusterID; id != "224.0.0.1" {
		t.Errorf("routeReflectorClusterID = %q after patch", id)
	}
	// A field the agent cannot honour is refused, naming it (the message
	// itself belongs to store/api).
	_, errs, code := h.run("", "patch", "felixconfiguration", "default", "-p", `{"spec":{"bpfEnabled":true}}`)
	if code != 1 || !strings.Contains(errs, "Failed to patch 'FelixConfiguration' resource") || !strings.Contains(errs, "spec.bpfEnabled") {
		t.Errorf("patch of an unsupported field: exit %d, %q", code, errs)
	}
	// A null deletes a member (RFC 7386).
	h.mustRun("", "patch", "ippool", "pool-a", "-p", `{"spec":{"disabled":null}}`)
	p, _ := h.cli.GetResource(t.Context(), mustKind(t, "IPPool"), "", "pool-a")
	if p.(*api.IPPool).Spec.Disabled {
		t.Error("disabled still true after a null patch")
	}
}

func mustKind(t *testing.T, name string) api.KindInfo {
	t.Helper()
	k, ok := api.LookupKind(name)
	if !ok {
		t.Fatalf("no kind %s", name)
	}
	return k
}

// patch and label keep what Calico stored that our types do not model.
func TestPatchAndLabelKeepUnmodelledFields(t *testing.T) {
	h := newHarness(t)
	for _, o := range storetest.CalicoObjectsWithUnmodelledFields() {
		storetest.PutRaw(t, h.cli, o)
		r, err := api.Decode([]byte(o.Value))
		if err != nil {
			t.Fatal(err)
		}
		kind, m := r.GetTypeMeta().Kind, r.GetObjectMeta()
		ns := []string{}
		if m.Namespace != "" {
			ns = []string{"-n", m.Namespace}
		}
		h.mustRun("", append([]string{"patch", kind, m.Name, "-p", `{"metadata":{"labels":{"patched":"yes"}}}`}, ns...)...)
		storetest.CheckUnmodelledKept(t, h.cli, o, "calicoctl patch")
		h.mustRun("", append([]string{"label", kind, m.Name, "labelled=yes"}, ns...)...)
		storetest.CheckUnmodelledKept(t, h.cli, o, "calicoctl label")
		for _, l := range []string{"patched", "labelled"} {
			if got, _ := storetest.JSONAt(storetest.StoredJSON(t, h.cli, o.Key), "metadata.labels."+l); got != "yes" {
				t.Errorf("%s: label %s = %v", o.Key, l, got)
			}
		}
	}
}

func TestLabel(t *testing.T) {
	h := newHarness(t)
	h.mustRun("", "apply", "-f", "testdata/all-kinds.yaml")
	got := h.transcript(
		[]string{"label", "nodes", "node-1", "cluster=frontend"},
		[]string{"label", "nodes", "node-1", "cluster=backend"},
		[]string{"label", "nodes", "node-1", "cluster=frontend"},
		[]string{"label", "nodes", "node-1", "cluster=backend", "--overwrite"},
		[]string{"label", "nodes", "node-1", "cluster", "--remove"},
		[]string{"label", "nodes", "node-1", "cluster", "--remove"},
		[]string{"label", "nodes", "node-9", "cluster=x"},
		[]string{"label", "workloadendpoints", "node--1-cni-abc123-eth0", "--namespace=default", "app=web"},
		[]string{"label", "nodes", "node-1", "a=b=c"},
		[]string{"label", "nodes", "node-1", "bad key=x"},
		[]string{"label", "nodes", "node-1", "k=v", "--overwrite", "--remove"},
		[]string{"get", "node", "node-1", "-o", "yaml"},
	)
	golden.Check(t, "label", scrubMeta(got))

	// Every kind can be labelled, set and removed.
	for _, k := range []struct{ kind, name, ns string }{
		{"ippool", "pool-a", ""}, {"node", "node-1", ""}, {"workloadendpoint", "node--1-cni-abc123-eth0", "default"},
		{"stagednetworkpolicy", "staged-deny", "default"}, {"profile", "net1", ""}, {"networkpolicy", "allow-web", "default"},
		{"globalnetworkpolicy", "deny-smtp", ""}, {"networkset", "partners", "default"}, {"globalnetworkset", "blocked", ""},
		{"bgppeer", "rr-1", ""}, {"bgpconfiguration", "default", ""}, {"felixconfiguration", "default", ""},
		{"tier", "security", ""}, {"clusterinformation", "default", ""},
	} {
		args := []string{"label", k.kind, k.name, "every=kind"}
		if k.ns != "" {
			args = append(args, "-n", k.ns)
		}
		out := h.mustRun("", args...)
		if want := fmt.Sprintf("Successfully set label every on %s %s\n", k.kind, k.name); out != want {
			t.Errorf("label %s: %q, want %q", k.kind, out, want)
		}
		r, err := h.cli.GetResource(t.Context(), mustKind(t, k.kind), k.ns, k.name)
		if err != nil {
			t.Fatal(err)
		}
		if r.GetObjectMeta().Labels["every"] != "kind" {
			t.Errorf("%s %s: labels %v", k.kind, k.name, r.GetObjectMeta().Labels)
		}
		h.mustRun("", append(args[:3:3], append([]string{"every", "--remove"}, args[4:]...)...)...)
		r, _ = h.cli.GetResource(t.Context(), mustKind(t, k.kind), k.ns, k.name)
		if _, has := r.GetObjectMeta().Labels["every"]; has {
			t.Errorf("%s %s: label not removed", k.kind, k.name)
		}
	}
}

// scrubMeta blanks the per-run metadata (uid, timestamps, revisions).
func scrubMeta(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		for _, f := range []string{"uid:", "creationTimestamp:", "resourceVersion:"} {
			if t := strings.TrimSpace(l); strings.HasPrefix(t, f) {
				lines[i] = l[:strings.Index(l, f)] + f + " SCRUBBED"
			}
		}
	}
	return strings.Join(lines, "\n")
}
