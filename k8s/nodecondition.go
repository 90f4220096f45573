package k8s

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The Kubernetes Node's NetworkUnavailable condition as Calico's
// calico-node sets it (the text is Calico's: tools and people match it).
const (
	NetworkUnavailable  = "NetworkUnavailable"
	CalicoIsUpReason    = "CalicoIsUp"
	CalicoIsUpMessage   = "Calico is running on this node"
	CalicoIsDownReason  = "CalicoIsDown"
	CalicoIsDownMessage = "Calico is shutting down on this node"
)

// NodeCondition is one entry of a Kubernetes Node's status.conditions.
type NodeCondition struct {
	Type               string `json:"type"`
	Status             string `json:"status"` // "True", "False", "Unknown"
	Reason             string `json:"reason,omitempty"`
	Message            string `json:"message,omitempty"`
	LastHeartbeatTime  string `json:"lastHeartbeatTime,omitempty"`
	LastTransitionTime string `json:"lastTransitionTime,omitempty"`
}

// networkCondition is the NetworkUnavailable condition calico-node writes:
// False ("CalicoIsUp") while it runs, True ("CalicoIsDown") as it stops.
func networkCondition(unavailable bool, now time.Time) NodeCondition {
	c := NodeCondition{Type: NetworkUnavailable, Status: "False", Reason: CalicoIsUpReason, Message: CalicoIsUpMessage}
	if unavailable {
		c.Status, c.Reason, c.Message = "True", CalicoIsDownReason, CalicoIsDownMessage
	}
	c.LastHeartbeatTime = now.UTC().Format(time.RFC3339)
	c.LastTransitionTime = c.LastHeartbeatTime
	return c
}

// SetNetworkUnavailable sets Kubernetes Node node's NetworkUnavailable
// condition as Calico does: a strategic-merge patch of nodes/<node>/status
// (conditions merge by type, so the kubelet's stay).
func (c *Client) SetNetworkUnavailable(ctx context.Context, node string, unavailable bool) error {
	patch, err := json.Marshal(map[string]any{"status": map[string]any{
		"conditions": []NodeCondition{networkCondition(unavailable, time.Now())}}})
	if err != nil {
		return err
	}
	_, err = c.dyn.Resource(nodesResource).Patch(ctx, node, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		return c.classify(fmt.Sprintf("setting NetworkUnavailable=%t on node %s", unavailable, node), err)
	}
	return nil
}

// NodeConditionOf reads Kubernetes Node node's condition of type typ;
// found is false when the node has none.
func (c *Client) NodeConditionOf(ctx context.Context, node, typ string) (cond NodeCondition, found bool, err error) {
	var n struct {
		Status struct {
			Conditions []NodeCondition `json:"conditions"`
		} `json:"status"`
	}
	if err := c.get(ctx, nodesResource, "node", "", node, &n); err != nil {
		return cond, false, err
	}
	for _, cd := range n.Status.Conditions {
		if cd.Type == typ {
			return cd, true, nil
		}
	}
	return cond, false, nil
}
