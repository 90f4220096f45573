package ctl_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/calico-aio/calico-aio/internal/golden"

	"github.com/calico-aio/calico-aio/store/storetest"
	"github.com/calico-aio/calico-aio/store/storetest/compat"
)

// compatSection is what real calicoctl printed for cmd (the first record).
func compatSection(t *testing.T, cmd string) string {
	t.Helper()
	out := compat.CalicoctlOutput()
	i := strings.Index(out, "### "+cmd+"\n")
	if i < 0 {
		t.Fatalf("no %q in the recorded calicoctl output", cmd)
	}
	rest := out[i+len("### "+cmd+"\n"):]
	if j := strings.Index(rest, "### "); j >= 0 {
		rest = rest[:j]
	}
	return rest
}

// putCompatResources stores the IP pools and nodes real Calico wrote.
func putCompatResources(t *testing.T, h *harness, plurals ...string) {
	t.Helper()
	kvs, err := compat.EtcdDump()
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range kvs {
		for _, p := range plurals {
			if strings.HasPrefix(kv.Key, "/calico/resources/v3/projectcalico.org/"+p+"/") {
				storetest.PutRaw(t, h.cli, storetest.CalicoObject{Key: kv.Key, Value: kv.Value})
			}
		}
	}
}

// custom-columns with real calicoctl's column names prints what real
// calicoctl printed for the same columns (its -o wide table).
func TestCustomColumnsMatchCalico(t *testing.T) {
	h := newHarness(t)
	putCompatResources(t, h, "ippools", "nodes")
	for _, c := range []struct{ cols, recorded string }{
		{"NAME,CIDR,NAT,IPIPMODE,VXLANMODE,DISABLED,DISABLEBGPEXPORT,SELECTOR,ASSIGNMENTMODE", "calicoctl get ippool -o wide"},
		{"name,asn,ipv4,ipv6", "calicoctl get nodes -o wide"},
	} {
		kind := strings.Fields(c.recorded)[2]
		got := h.mustRun("", "get", kind, "-o", "custom-columns="+c.cols)
		if want := compatSection(t, c.recorded); got != want {
			t.Errorf("get %s -o custom-columns=%s:\n%q\nreal calicoctl (%s):\n%q", kind, c.cols, got, c.recorded, want)
		}
	}
}

func TestGetOutputFormats(t *testing.T) {
	h := newHarness(t)
	h.mustRun("", "apply", "-f", "testdata/all-kinds.yaml")
	tmplFile := filepath.Join(t.TempDir(), "pools.tmpl")
	if err := os.WriteFile(tmplFile, []byte("{{range .}}{{.metadata.name}}: {{.spec.cidr}} nat={{.spec.natOutgoing}}\n{{end}}"), 0o644); err != nil {
		t.Fatal(err)
	}
	got := h.transcript(
		[]string{"get", "ippools", "-o", "custom-columns=NAME,CIDR"},
		[]string{"get", "ippools", "-o", "custom-columns=CIDR,DISABLED,ASSIGNMENTMODE"},
		[]string{"get", "workloadendpoints", "-A", "-o", "custom-columns=NAME,NODE,NETWORKS"},
		[]string{"get", "nodes", "-o", "custom-columns=NAME,ASN"},
		[]string{"get", "ippools", "-o", "custom-columns=NAME,NOPE"},
		[]string{"get", "ippools", "-o", `go-template={{range .}}{{.ObjectMeta.Name}} {{.Spec.CIDR}} {{.Name}}{{"\n"}}{{end}}`},
		[]string{"get", "nodes", "-o", `go-template={{range .}}{{.Name}} asn={{config "asnumber"}} labels={{join .Labels ","}}{{"\n"}}{{end}}`},
		[]string{"get", "globalnetworksets", "-o", `go-template={{range .}}{{.Name}}: {{joinAndTruncate .Spec.Nets "," 12}}{{"\n"}}{{end}}`},
		[]string{"get", "ippools", "-o", "go-template-file=" + tmplFile},
		[]string{"get", "ippools", "-o", "go-template={{range .}}{{.Nope.Deeper}}{{end"},
		[]string{"get", "ippools", "-o", "go-template-file=/nonexistent/x.tmpl"},
		[]string{"get", "ippools", "-o", "table"},
	)
	golden.Check(t, "get-output-formats", strings.ReplaceAll(got, tmplFile, "POOLS.TMPL"))
}
