package k8s

import (
	"context"
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var networkPoliciesResource = schema.GroupVersionResource{Group: "networking.k8s.io", Version: "v1", Resource: "networkpolicies"}

// ListNamespaces lists every namespace.
func (c *Client) ListNamespaces(ctx context.Context) ([]Namespace, error) {
	var out []Namespace
	return out, c.list(ctx, namespacesResource, "namespaces", &out)
}

// ListServiceAccounts lists the service accounts of every namespace.
func (c *Client) ListServiceAccounts(ctx context.Context) ([]ServiceAccount, error) {
	var out []ServiceAccount
	return out, c.list(ctx, serviceAccountsResource, "service accounts", &out)
}

// ListNetworkPolicies lists the networking.k8s.io/v1 NetworkPolicies of
// every namespace.
func (c *Client) ListNetworkPolicies(ctx context.Context) ([]NetworkPolicy, error) {
	var out []NetworkPolicy
	return out, c.list(ctx, networkPoliciesResource, "network policies", &out)
}

// ListPods lists the pods of every namespace.
func (c *Client) ListPods(ctx context.Context) ([]Pod, error) {
	var out []Pod
	return out, c.list(ctx, podsResource, "pods", &out)
}

// ListNodes lists every node.
func (c *Client) ListNodes(ctx context.Context) ([]Node, error) {
	var out []Node
	return out, c.list(ctx, nodesResource, "nodes", &out)
}

// list reads every object of res (all namespaces) and converts the items,
// through JSON, into out (a pointer to a slice).
func (c *Client) list(ctx context.Context, res schema.GroupVersionResource, what string, out any) error {
	l, err := c.dyn.Resource(res).List(ctx, metav1.ListOptions{})
	if err != nil {
		return c.classify("listing "+what, err)
	}
	items := make([]map[string]any, len(l.Items))
	for i := range l.Items {
		items[i] = l.Items[i].Object
	}
	b, err := json.Marshal(items)
	if err != nil {
		return fmt.Errorf("encoding %s: %w", what, err)
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("decoding %s: %w", what, err)
	}
	return nil
}
