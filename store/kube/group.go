package kube

import (
	"context"
	"fmt"
	"log/slog"
	"slices"

	"github.com/calico-aio/calico-aio/k8s"
	"github.com/calico-aio/calico-aio/store/kdd"
)

// ChooseAPIGroup is Calico's discovery rule for the group of its resource
// kinds, given the API groups a server serves: projectcalico.org/v3 when
// the projectcalico.org group is served and crd.projectcalico.org is not
// (native v3 CRDs); otherwise crd.projectcalico.org/v1 (Calico's manifest,
// or the aggregated Calico API server serving projectcalico.org/v3 in
// front of the v1 CRDs, which are then read directly).
func ChooseAPIGroup(served []string) kdd.APIGroup {
	v3, _ := kdd.APIGroupV3.GroupVersion()
	if slices.Contains(served, v3) && !slices.Contains(served, kdd.Group) {
		return kdd.APIGroupV3
	}
	return kdd.APIGroupV1
}

// DiscoverAPIGroup asks the API server which groups it serves and applies
// ChooseAPIGroup.
func DiscoverAPIGroup(ctx context.Context, c *k8s.Client) (kdd.APIGroup, error) {
	served, err := c.APIGroups(ctx)
	if err != nil {
		return "", fmt.Errorf("discovering Calico's API group (set CALICO_API_GROUP to skip it): %w", err)
	}
	return ChooseAPIGroup(served), nil
}

// APIGroup is the group of Calico's resource kinds this backend uses,
// discovered on first use when NewWithGroup was given none.
func (b *Backend) APIGroup(ctx context.Context) (kdd.APIGroup, error) {
	b.groupMu.Lock()
	defer b.groupMu.Unlock()
	if b.group != "" {
		return b.group, nil
	}
	// A failed discovery is not remembered: the next call asks again
	// rather than settle on a group the server may not serve.
	g, err := DiscoverAPIGroup(ctx, b.client)
	if err != nil {
		return "", err
	}
	slog.Info("Calico API group discovered", "group", string(g), "server", b.client.Server())
	b.group = g
	return g, nil
}

// apiGroup is the group kind k's custom resources are in; an error when
// that group does not serve k.
func (b *Backend) apiGroup(ctx context.Context, k kdd.Kind) (kdd.APIGroup, error) {
	g, err := b.APIGroup(ctx)
	if err != nil {
		return "", err
	}
	return g, g.Serves(k)
}
