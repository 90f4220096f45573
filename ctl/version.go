package ctl

import (
	"context"
	"fmt"
	"runtime/debug"

	"github.com/calico-aio/calico-aio/build/version"
	"github.com/calico-aio/calico-aio/store/api"
)

// runVersion prints what Calico's calicoctl version prints: our own build
// (client version and git commit), then the cluster's Calico version and
// type from ClusterInformation "default". An unreachable datastore is
// reported on the last line and is not an error, as in Calico.
func runVersion(o IO, args []string) error {
	fs := newFlagSet("version", o)
	var ds datastoreFlags
	ds.register(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	fmt.Fprintf(o.Stdout, "Client Version:    %s\n", version.Version)
	fmt.Fprintf(o.Stdout, "Git commit:        %s\n", gitCommit())
	calicoVersion, clusterType, err := clusterVersion(&ds, o)
	if err != nil {
		fmt.Fprintf(o.Stdout, "Unable to retrieve Cluster Version or Type: %v\n", err)
		return nil
	}
	fmt.Fprintf(o.Stdout, "Cluster Calico Version:  %s\n", calicoVersion)
	fmt.Fprintf(o.Stdout, "Cluster Type:            %s\n", clusterType)
	return nil
}

// clusterVersion reads spec.calicoVersion and spec.clusterType of
// ClusterInformation "default" ("unknown" where empty).
func clusterVersion(ds *datastoreFlags, o IO) (string, string, error) {
	ctx := context.Background()
	c, err := connect(ctx, ds, o)
	if err != nil {
		return "", "", err
	}
	defer c.Close()
	k, _ := api.LookupKind("ClusterInformation")
	r, err := c.GetResource(ctx, k, "", "default")
	if err != nil {
		return "", "", datastoreError(c, err)
	}
	ci := r.(*api.ClusterInformation)
	orUnknown := func(s string) string {
		if s == "" {
			return "unknown"
		}
		return s
	}
	return orUnknown(ci.Spec.CalicoVersion), orUnknown(ci.Spec.ClusterType), nil
}

// gitCommit is the short revision the binary was built from, as the Go
// toolchain stamped it ("unknown" when it did not).
func gitCommit() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	rev, dirty := "", false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return "unknown"
	}
	if len(rev) > 7 {
		rev = rev[:7]
	}
	if dirty {
		rev += "-dirty"
	}
	return rev
}
