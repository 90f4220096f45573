package ctl_test

import (
	"strings"
	"testing"

	"github.com/calico-aio/calico-aio/internal/golden"
)

func TestValidateOffline(t *testing.T) {
	// No datastore: an unreachable endpoint proves validate never uses it.
	h := &harness{t: t, ep: "http://127.0.0.1:1"}
	all := readFixture(t)
	got := h.transcript(
		[]string{"validate", "-f", "testdata/all-kinds.yaml"},
		[]string{"validate", "-f", "testdata/resdir/a-pool.yaml"},
		[]string{"validate", "-f", "testdata/invalid-second.yaml"},
		[]string{"validate", "-f", "testdata/invalid-first.yaml"},
		[]string{"validate", "-f", "testdata/resdir"},
		[]string{"validate", "-f", "testdata/resdir", "--skip-empty"},
		[]string{"validate", "-f", "testdata/resdir", "-R", "--skip-empty"},
		[]string{"validate", "-f", "testdata/no-such-file.yaml"},
		[]string{"validate"},
	)
	golden.Check(t, "validate", got)
	out, _, code := h.run(all, "validate", "-f", "-")
	if code != 0 || !strings.Contains(out, "Successfully validated 14 resource(s)") {
		t.Errorf("validate from stdin: exit %d, %q", code, out)
	}
}

func TestApplyDirectory(t *testing.T) {
	h := newHarness(t)
	got := h.transcript(
		[]string{"apply", "-f", "testdata/resdir", "--skip-empty"},
		[]string{"get", "globalnetworkpolicies"},
		[]string{"apply", "-f", "testdata/resdir", "-R", "--skip-empty"},
		[]string{"get", "globalnetworkpolicies"},
		[]string{"get", "profiles"},
		[]string{"apply", "-f", "testdata/resdir"},
		[]string{"delete", "-f", "testdata/resdir", "--recursive", "--skip-empty"},
		[]string{"create", "-f", "testdata/invalid-second.yaml"},
		[]string{"get", "ippools"},
	)
	golden.Check(t, "apply-directory", got)
}
