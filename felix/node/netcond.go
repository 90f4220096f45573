package node

import (
	"context"
	"log/slog"
	"time"

	"github.com/calico-aio/calico-aio/k8s"
)

// NodeConditions reads and sets a Kubernetes Node's NetworkUnavailable
// condition (k8s.Client).
type NodeConditions interface {
	SetNetworkUnavailable(ctx context.Context, node string, unavailable bool) error
	NodeConditionOf(ctx context.Context, node, typ string) (k8s.NodeCondition, bool, error)
}

// networkDownTimeout bounds the write of NetworkUnavailable True as the
// agent stops.
const networkDownTimeout = 10 * time.Second

// SetNetworkUp clears Kubernetes Node node's NetworkUnavailable condition
// as Calico's calico-node does at start (False, "CalicoIsUp").
func SetNetworkUp(ctx context.Context, kc NodeConditions, node string) error {
	if err := kc.SetNetworkUnavailable(ctx, node, false); err != nil {
		return err
	}
	slog.Info("Kubernetes node condition set", "node", node, "NetworkUnavailable", false, "reason", k8s.CalicoIsUpReason)
	return nil
}

// KeepNetworkUp keeps node's NetworkUnavailable condition as SetNetworkUp
// left it until ctx ends: every interval it reads the condition and clears
// it again if another writer (a cloud route controller) changed it. When
// ctx ends it sets the condition True ("CalicoIsDown"), as Calico's
// calico-node does on shutdown, and returns.
func KeepNetworkUp(ctx context.Context, kc NodeConditions, node string, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			setNetworkDown(context.WithoutCancel(ctx), kc, node)
			return
		case <-t.C:
		}
		c, found, err := kc.NodeConditionOf(ctx, node, k8s.NetworkUnavailable)
		if err != nil {
			slog.Warn("reading NetworkUnavailable", "node", node, "err", err)
			continue
		}
		if found && c.Status == "False" && c.Reason == k8s.CalicoIsUpReason {
			continue
		}
		slog.Info("NetworkUnavailable changed by another writer; clearing it", "node", node, "status", c.Status, "reason", c.Reason)
		if err := SetNetworkUp(ctx, kc, node); err != nil && ctx.Err() == nil {
			slog.Warn("clearing NetworkUnavailable", "node", node, "err", err)
		}
	}
}

// setNetworkDown sets node's NetworkUnavailable condition True
// ("CalicoIsDown") within networkDownTimeout.
func setNetworkDown(ctx context.Context, kc NodeConditions, node string) {
	ctx, cancel := context.WithTimeout(ctx, networkDownTimeout)
	defer cancel()
	if err := kc.SetNetworkUnavailable(ctx, node, true); err != nil {
		slog.Warn("setting NetworkUnavailable on shutdown", "node", node, "err", err)
		return
	}
	slog.Info("Kubernetes node condition set", "node", node, "NetworkUnavailable", true, "reason", k8s.CalicoIsDownReason)
}
