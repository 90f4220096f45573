package store_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/calico-aio/calico-aio/store"
	"github.com/calico-aio/calico-aio/store/api"
	"github.com/calico-aio/calico-aio/store/etcdv3"
	"github.com/calico-aio/calico-aio/store/storetest"
	"github.com/calico-aio/calico-aio/store/storetest/compat"
)

// calicoctlVersionCheck is the check Calico's calicoctl makes before every
// command: an empty cluster version is not checked; otherwise the part
// before the first "-", without a leading "v", must be its own.
func calicoctlVersionCheck(client, cluster string) error {
	if cluster == "" {
		return nil
	}
	core := func(v string) string { return strings.Split(strings.TrimPrefix(v, "v"), "-")[0] }
	if core(client) != core(cluster) {
		return fmt.Errorf("version mismatch. Client Version: %s Cluster Version: %s", client, core(cluster))
	}
	return nil
}

const clusterInfoKey = etcdv3.ResourcePrefix + "clusterinformations/default"

// storedCalicoVersion is spec.calicoVersion as stored.
func storedCalicoVersion(t *testing.T, c *store.Client) string {
	t.Helper()
	v, _ := storetest.JSONAt(storetest.StoredJSON(t, c, clusterInfoKey), "spec.calicoVersion")
	s, _ := v.(string)
	return s
}

func TestCalicoctlVersionCheckRule(t *testing.T) {
	for _, tc := range []struct {
		client, cluster string
		ok              bool
	}{
		{"v3.32.1", "v3.32.1", true},
		{"v3.32.1", "3.32.1", true},
		{"v3.32.1", "v3.32.1-0.dev-12-gabcdef", true},
		{"v3.32.1", "", true},
		{"v3.32.1", "2136f0f", false}, // what our old builds wrote
		{"v3.32.1", "dev", false},
		{"v3.32.1", "v3.31.2", false},
	} {
		if err := calicoctlVersionCheck(tc.client, tc.cluster); (err == nil) != tc.ok {
			t.Errorf("check(%q, %q) = %v, want ok %v", tc.client, tc.cluster, err, tc.ok)
		}
	}
}

// A fresh datastore gets the Calico API version, not our build version,
// so that Calico's calicoctl of that release works against it.
func TestFreshClusterInformationPassesCalicoctlCheck(t *testing.T) {
	c := storetestClient(t)
	if err := c.EnsureClusterInformation(context.Background(), "2136f0f"); err != nil {
		t.Fatal(err)
	}
	got := storedCalicoVersion(t, c)
	if err := calicoctlVersionCheck(compat.CalicoVersion, got); err != nil {
		t.Errorf("calicoctl %s against a fresh datastore: %v", compat.CalicoVersion, err)
	}
	if got != api.CalicoAPIVersion || api.CalicoAPIVersion != compat.CalicoVersion {
		t.Errorf("calicoVersion %q, want %s (the recorded compat data's %s)", got, api.CalicoAPIVersion, compat.CalicoVersion)
	}
}

// A ClusterInformation our old builds wrote (a git hash, "dev", or nothing)
// is repaired in place: calicoVersion becomes the API version and every
// other field, modelled or not, stays as stored.
func TestClusterInformationRepairedFromBuildVersion(t *testing.T) {
	for _, old := range []string{"2136f0f", "dev", ""} {
		t.Run("was "+old, func(t *testing.T) {
			c := storetestClient(t)
			ver := ""
			if old != "" {
				ver = `"calicoVersion":"` + old + `",`
			}
			o := storetest.CalicoObject{Key: clusterInfoKey, Value: `{"kind":"ClusterInformation","apiVersion":"projectcalico.org/v3","metadata":{"name":"default","uid":"a35da14f-52f1-409b-afa2-150cbad179f5","creationTimestamp":"2026-11-21T08:25:23Z","generation":4},"spec":{"clusterGUID":"f9c6e713d2624feea375baeb70702d2d",` + ver + `"clusterType":"calico-aio","datastoreReady":true,"variant":"Calico","cnxVersion":"v3.21.0"}}`}
			storetest.PutRaw(t, c, o)
			before := storetest.StoredJSON(t, c, clusterInfoKey)
			if old != "" && calicoctlVersionCheck(compat.CalicoVersion, old) == nil {
				t.Fatalf("the old value %q should fail calicoctl's check", old)
			}
			if err := c.EnsureClusterInformation(context.Background(), "2136f0f"); err != nil {
				t.Fatal(err)
			}
			after := storetest.StoredJSON(t, c, clusterInfoKey)
			got := storedCalicoVersion(t, c)
			if got != compat.CalicoVersion {
				t.Errorf("calicoVersion %q after repair, want %s", got, compat.CalicoVersion)
			}
			if err := calicoctlVersionCheck(compat.CalicoVersion, got); err != nil {
				t.Errorf("calicoctl %s after repair: %v", compat.CalicoVersion, err)
			}
			delete(before["spec"].(map[string]any), "calicoVersion")
			delete(after["spec"].(map[string]any), "calicoVersion")
			if !reflect.DeepEqual(before, after) {
				t.Errorf("repair changed other fields:\nbefore %v\nafter  %v", before, after)
			}
		})
	}
}

// A Calico release version another Calico wrote is not ours to change, and
// a ClusterInformation already right is not rewritten.
func TestClusterInformationKeepsCalicoRelease(t *testing.T) {
	for _, v := range []string{"v3.31.2", compat.CalicoVersion} {
		c := storetestClient(t)
		val := `{"kind":"ClusterInformation","apiVersion":"projectcalico.org/v3","metadata":{"name":"default"},"spec":{"clusterGUID":"f9c6e713d2624feea375baeb70702d2d","calicoVersion":"` + v + `","datastoreReady":true}}`
		storetest.PutRaw(t, c, storetest.CalicoObject{Key: clusterInfoKey, Value: val})
		before, err := storetest.Raw(t, c).GetKey(context.Background(), clusterInfoKey)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.EnsureClusterInformation(context.Background(), "2136f0f"); err != nil {
			t.Fatal(err)
		}
		after, err := storetest.Raw(t, c).GetKey(context.Background(), clusterInfoKey)
		if err != nil {
			t.Fatal(err)
		}
		if after.Revision != before.Revision || string(after.Value) != val {
			t.Errorf("calicoVersion %s: rewritten to %s", v, after.Value)
		}
	}
}

func TestIsCalicoRelease(t *testing.T) {
	for v, want := range map[string]bool{
		"v3.32.1": true, "3.32.1": true, "v3.30.0-0.dev-245-g1a2b3c4": true, "v4.0.0": true,
		"2136f0f": false, "dev": false, "": false, "v0.1.0": false, "v3.32": false, "v3.32.x": false, "1234567": false,
	} {
		if got := api.IsCalicoRelease(v); got != want {
			t.Errorf("IsCalicoRelease(%q) = %v, want %v", v, got, want)
		}
	}
}

// Every concurrent agent ends with one ClusterInformation and the API
// version in it.
func TestEnsureClusterInformationConcurrent(t *testing.T) {
	c := storetestClient(t)
	storetest.PutRaw(t, c, storetest.CalicoObject{Key: clusterInfoKey, Value: `{"kind":"ClusterInformation","apiVersion":"projectcalico.org/v3","metadata":{"name":"default"},"spec":{"calicoVersion":"dev"}}`})
	errs := make(chan error, 4)
	for range 4 {
		go func() { errs <- c.EnsureClusterInformation(context.Background(), "dev") }()
	}
	var all []error
	for range 4 {
		all = append(all, <-errs)
	}
	if err := errors.Join(all...); err != nil {
		t.Fatal(err)
	}
	if got := storedCalicoVersion(t, c); got != api.CalicoAPIVersion {
		t.Errorf("calicoVersion %q", got)
	}
}

// EnsureClusterInformationOfType creates with the cluster type given and
// merges it into a stored one as Calico does (the stored types first);
// EnsureClusterInformation leaves the stored type alone.
func TestClusterInformationOfType(t *testing.T) {
	ctx := context.Background()
	c := storetestClient(t)
	k, _ := api.LookupKind("ClusterInformation")
	clusterType := func() string {
		t.Helper()
		r, err := c.GetResource(ctx, k, "", "default")
		if err != nil {
			t.Fatal(err)
		}
		return r.(*api.ClusterInformation).Spec.ClusterType
	}
	if err := c.EnsureClusterInformationOfType(ctx, "test", "k8s,bgp,kdd"); err != nil {
		t.Fatal(err)
	}
	if got := clusterType(); got != "k8s,bgp,kdd" {
		t.Errorf("created with clusterType %q", got)
	}
	for _, step := range []struct{ add, want string }{{"kdd,operator", "k8s,bgp,kdd,operator"}, {"bgp", "k8s,bgp,kdd,operator"}} {
		if err := c.EnsureClusterInformationOfType(ctx, "test", step.add); err != nil {
			t.Fatal(err)
		}
		if got := clusterType(); got != step.want {
			t.Errorf("after adding %q: clusterType %q, want %q", step.add, got, step.want)
		}
	}
	if err := c.EnsureClusterInformation(ctx, "test"); err != nil {
		t.Fatal(err)
	}
	if got := clusterType(); got != "k8s,bgp,kdd,operator" {
		t.Errorf("EnsureClusterInformation changed clusterType to %q", got)
	}
	if got := storedCalicoVersion(t, c); got != api.CalicoAPIVersion {
		t.Errorf("calicoVersion %q", got)
	}
}

func TestMergeClusterTypes(t *testing.T) {
	for _, tc := range []struct{ have, add, want string }{
		{"", "k8s,bgp,kdd", "k8s,bgp,kdd"},
		{"kdd", "k8s,bgp,kdd", "kdd,k8s,bgp"},
		{"k8s,bgp,kdd", "kdd", "k8s,bgp,kdd"},
		{"calico-aio", "k8s,,kdd", "calico-aio,k8s,kdd"},
	} {
		if got := store.MergeClusterTypes(tc.have, tc.add); got != tc.want {
			t.Errorf("MergeClusterTypes(%q, %q) = %q, want %q", tc.have, tc.add, got, tc.want)
		}
	}
}
