package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"time"

	"github.com/calico-aio/calico-aio/store"
	"github.com/calico-aio/calico-aio/store/api"
)

// calico-node's start-up duties in a Kubernetes datastore, as Calico's
// (docs/BOOTSTRAP.md, "Kubernetes datastore"). They are written against
// store.Client; only the NetworkUnavailable condition needs the
// Kubernetes API itself.

// KubeClusterType is the spec.clusterType calico-node gives
// ClusterInformation in a Kubernetes datastore: the CLUSTER_TYPE variable
// (Calico's manifest sets "k8s,bgp") followed by "kdd", or "kdd" alone.
func KubeClusterType(clusterTypeEnv string) string {
	if t := strings.TrimSuffix(clusterTypeEnv, ","); t != "" {
		return t + ",kdd"
	}
	return "kdd"
}

// KubeBootstrap creates what calico-node creates at start in a Kubernetes
// datastore, as Calico's: ClusterInformation default (clusterType
// KubeClusterType(clusterTypeEnv), merged into a stored one), the default
// tiers, FelixConfiguration default and the default IP pools. Each step
// keeps what is stored, so it may be repeated after an error.
func KubeBootstrap(ctx context.Context, c *store.Client, buildVersion, clusterTypeEnv string, pools []*api.IPPool) error {
	if err := c.EnsureClusterInformationOfType(ctx, buildVersion, KubeClusterType(clusterTypeEnv)); err != nil {
		return err
	}
	if err := c.EnsureDefaultTiers(ctx); err != nil {
		return err
	}
	if err := EnsureDefaultFelixConfiguration(ctx, c); err != nil {
		return err
	}
	return EnsureDefaultPools(ctx, c, pools)
}

// EnsureDefaultFelixConfiguration creates FelixConfiguration default when
// there is none, as Calico's calico-node does at start: reportingInterval
// 0s (no status reports) and logSeverityScreen Info. A stored one is kept,
// whatever it says.
func EnsureDefaultFelixConfiguration(ctx context.Context, c *store.Client) error {
	k, _ := api.LookupKind("FelixConfiguration")
	fc := k.NewObject().(*api.FelixConfiguration)
	fc.Metadata.Name = "default"
	fc.Spec.ReportingInterval = &api.Duration{}
	fc.Spec.LogSeverityScreen = "Info"
	_, err := c.CreateResource(ctx, fc)
	switch {
	case err == nil:
		slog.Info("created FelixConfiguration default", "reportingInterval", "0s", "logSeverityScreen", "Info")
	case errors.Is(err, store.ErrAlreadyExists):
	default:
		return fmt.Errorf("creating FelixConfiguration default: %w", err)
	}
	return nil
}

// KubeNodeMissingError says this node's Kubernetes Node does not exist: in
// a Kubernetes datastore the Calico Node is the Kubernetes Node, which the
// kubelet registers; calico-node never creates it.
type KubeNodeMissingError struct{ Node string }

func (e *KubeNodeMissingError) Error() string {
	return fmt.Sprintf("Kubernetes node %q does not exist: in the Kubernetes datastore calico-node registers on the node "+
		"the kubelet created and never creates one (is NODENAME the Kubernetes node's name?)", e.Node)
}

// WaitForKubeNode waits, checking every interval, until node's Calico Node
// (its Kubernetes Node) exists. While it does not, it says so once; when
// ctx ends first, the error is a *KubeNodeMissingError (or the last
// datastore error) wrapping ctx's.
func WaitForKubeNode(ctx context.Context, c *store.Client, node string, every time.Duration) error {
	k, _ := api.LookupKind("Node")
	var last error // of the last attempt that ctx did not cut short
	for {
		_, err := c.GetResource(ctx, k, "", node)
		switch {
		case err == nil:
			return nil
		case last != nil && cutShort(ctx, every):
		case errors.Is(err, store.ErrNotFound):
			if last == nil || !errors.As(last, new(*KubeNodeMissingError)) {
				slog.Warn("waiting for this node's Kubernetes Node", "err", &KubeNodeMissingError{Node: node})
			}
			last = &KubeNodeMissingError{Node: node}
		default:
			slog.Warn("reading this node's Kubernetes Node", "node", node, "err", err)
			last = err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (%w)", last, ctx.Err())
		case <-time.After(every):
		}
	}
}

// cutShort: ctx is done, or its deadline comes before another attempt
// would. An attempt then may fail for the deadline rather than for the
// datastore (client-go's rate limiter refuses a wait that would pass the
// deadline before the deadline is there), which says less than the
// attempt before.
func cutShort(ctx context.Context, every time.Duration) bool {
	if ctx.Err() != nil {
		return true
	}
	dl, ok := ctx.Deadline()
	return ok && time.Until(dl) < every
}

// RegisterKube registers this node in a Kubernetes datastore: Register
// (its addresses and AS number become the projectcalico.org/* annotations
// of the Kubernetes Node; its labels are the Kubernetes Node's) once the
// Kubernetes Node exists (WaitForKubeNode). The orchRef is the Kubernetes
// Node itself, so none is written.
func RegisterKube(ctx context.Context, c *store.Client, node string, v4, v6 netip.Prefix, asn uint32, every time.Duration) error {
	if err := WaitForKubeNode(ctx, c, node, every); err != nil {
		return err
	}
	return Register(ctx, c, node, "", v4, v6, asn)
}
