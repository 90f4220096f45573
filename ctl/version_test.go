package ctl_test

import (
	"strings"
	"testing"

	"github.com/calico-aio/calico-aio/build/version"
	"github.com/calico-aio/calico-aio/store/api"
	"github.com/calico-aio/calico-aio/store/storetest"
)

// calicoctl version shows our build as the client and ClusterInformation's
// Calico version as the cluster's, which a write made the API version
// even when an old build had written its hash there.
func TestVersionShowsClientAndClusterVersions(t *testing.T) {
	h := newHarness(t)
	storetest.PutRaw(t, h.cli, storetest.CalicoObject{
		Key:   "/calico/resources/v3/projectcalico.org/clusterinformations/default",
		Value: `{"kind":"ClusterInformation","apiVersion":"projectcalico.org/v3","metadata":{"name":"default"},"spec":{"clusterGUID":"f9c6e713d2624feea375baeb70702d2d","calicoVersion":"2136f0f","clusterType":"calico-aio","datastoreReady":true}}`,
	})
	out := h.mustRun("", "version")
	for _, want := range []string{"Client Version:    " + version.Version + "\n", "Git commit:        ", "Cluster Calico Version:  2136f0f\n", "Cluster Type:            calico-aio\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("before repair, version lacks %q:\n%s", want, out)
		}
	}
	h.mustRun("apiVersion: projectcalico.org/v3\nkind: IPPool\nmetadata:\n  name: p\nspec:\n  cidr: 10.70.0.0/16\n", "apply", "-f", "-")
	out = h.mustRun("", "version")
	if !strings.Contains(out, "Cluster Calico Version:  "+api.CalicoAPIVersion+"\n") || !strings.Contains(out, "Client Version:    "+version.Version+"\n") {
		t.Errorf("after a write, version:\n%s", out)
	}
}

// Without a datastore the client lines still print and the command
// succeeds, as Calico's does.
func TestVersionWithoutDatastore(t *testing.T) {
	var h harness
	h.t = t
	h.ep = "http://127.0.0.1:1" // nothing listens there
	out, errs, code := h.run("", "version", "--timeout", "1s")
	if code != 0 || !strings.Contains(out, "Client Version:") || !strings.Contains(out, "Unable to retrieve Cluster Version or Type") {
		t.Errorf("exit %d\nstdout: %s\nstderr: %s", code, out, errs)
	}
}
