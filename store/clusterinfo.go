package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/calico-aio/calico-aio/store/api"
)

// maxClusterInfoAttempts bounds the compare-and-swap retries of
// EnsureClusterInformation.
const maxClusterInfoAttempts = 5

// EnsureClusterInformation makes ClusterInformation "default" fit for
// Calico's tools. When the datastore has none it creates one (a fresh
// clusterGUID, datastoreReady true) as Calico does on first use. Its
// spec.calicoVersion is api.CalicoAPIVersion, the Calico release we are
// compatible with, never our build version: Calico's calicoctl compares
// that field with its own version. A stored one whose calicoVersion is not
// a Calico release (our old builds wrote a git hash or "dev") is repaired
// with a compare-and-swap that keeps every other field, including those our
// types do not model; one that names a release is left alone. buildVersion,
// the writer's own version, is only logged.
func (c *Client) EnsureClusterInformation(ctx context.Context, buildVersion string) error {
	return c.ensureClusterInformation(ctx, buildVersion, "calico-aio", false)
}

// EnsureClusterInformationOfType is EnsureClusterInformation as Calico's
// calico-node does it in a Kubernetes datastore: a new ClusterInformation
// gets spec.clusterType clusterType (a comma-separated list, e.g.
// "k8s,bgp,kdd"), and a stored one gets each type of the list it lacks
// appended to its own, which stay first and in their order.
func (c *Client) EnsureClusterInformationOfType(ctx context.Context, buildVersion, clusterType string) error {
	return c.ensureClusterInformation(ctx, buildVersion, clusterType, true)
}

func (c *Client) ensureClusterInformation(ctx context.Context, buildVersion, clusterType string, mergeType bool) error {
	k, _ := api.LookupKind("ClusterInformation")
	key := ResourceKey(k, "", "default")
	for range maxClusterInfoAttempts {
		o, err := c.Get(ctx, key)
		if errors.Is(err, ErrNotFound) {
			err = c.createClusterInformation(ctx, k, clusterType)
			if errors.Is(err, ErrAlreadyExists) {
				continue // created meanwhile: check what was written
			}
			if err == nil {
				slog.Info("created ClusterInformation default", "calicoVersion", api.CalicoAPIVersion, "writer", buildVersion)
			}
			return err
		}
		if err != nil {
			return err
		}
		r, err := DecodeObject(o)
		if err != nil {
			return fmt.Errorf("reading ClusterInformation default: %w", err)
		}
		ci := r.(*api.ClusterInformation)
		old, oldType := ci.Spec.CalicoVersion, ci.Spec.ClusterType
		if mergeType {
			ci.Spec.ClusterType = MergeClusterTypes(oldType, clusterType)
		}
		if api.IsCalicoRelease(old) && ci.Spec.ClusterType == oldType {
			return nil
		}
		if !api.IsCalicoRelease(old) {
			ci.Spec.CalicoVersion = api.CalicoAPIVersion
		}
		val, err := Encode(ci)
		if err != nil {
			return err
		}
		_, err = c.Update(ctx, key, val, o.Revision)
		if errors.Is(err, ErrConflict) {
			continue
		}
		if err != nil {
			return fmt.Errorf("ClusterInformation default: setting spec.calicoVersion %q to %s, spec.clusterType %q to %q: %w",
				old, ci.Spec.CalicoVersion, oldType, ci.Spec.ClusterType, err)
		}
		slog.Info("updated ClusterInformation default", "calicoVersion", ci.Spec.CalicoVersion, "was", old,
			"clusterType", ci.Spec.ClusterType, "typeWas", oldType, "writer", buildVersion)
		return nil
	}
	return fmt.Errorf("ClusterInformation default: gave up after %d conflicting writes", maxClusterInfoAttempts)
}

// MergeClusterTypes is the comma-separated list of cluster types have
// followed by each type of add that it lacks, as Calico merges a
// ClusterInformation's clusterType.
func MergeClusterTypes(have, add string) string {
	if have == "" {
		return add
	}
	out := strings.Split(have, ",")
	for _, t := range strings.Split(add, ",") {
		if t != "" && !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return strings.Join(out, ",")
}

func (c *Client) createClusterInformation(ctx context.Context, k api.KindInfo, clusterType string) error {
	ci := k.NewObject().(*api.ClusterInformation)
	ci.Metadata.Name = "default"
	guid := NewUID()
	ready := true
	ci.Spec.ClusterGUID = guid[:8] + guid[9:13] + guid[14:18] + guid[19:23] + guid[24:]
	ci.Spec.CalicoVersion = api.CalicoAPIVersion
	ci.Spec.DatastoreReady = &ready
	ci.Spec.ClusterType = clusterType
	if _, err := c.create(ctx, ci); err != nil {
		return fmt.Errorf("creating ClusterInformation default: %w", err)
	}
	return nil
}
