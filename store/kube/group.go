package kube

import (
	"context"
	"errors"
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
	g, _, err := discover(ctx, c)
	return g, err
}

// discover is DiscoverAPIGroup that also says whether the server serves
// either of Calico's groups.
func discover(ctx context.Context, c *k8s.Client) (g kdd.APIGroup, calico bool, err error) {
	served, err := c.APIGroups(ctx)
	if err != nil {
		return "", false, fmt.Errorf("discovering Calico's API group (set CALICO_API_GROUP to skip it): %w", err)
	}
	v3, _ := kdd.APIGroupV3.GroupVersion()
	return ChooseAPIGroup(served), slices.Contains(served, kdd.Group) || slices.Contains(served, v3), nil
}

// APIGroup is the group of Calico's resource kinds this backend uses:
// the one NewWithGroup was given, else the one discovery found (asked
// here if it was not yet). Discovery that finds neither group served
// settles nothing (v1 is used for now and the next call asks again).
func (b *Backend) APIGroup(ctx context.Context) (kdd.APIGroup, error) {
	b.groupMu.Lock()
	defer b.groupMu.Unlock()
	if b.group != "" {
		return b.group, nil
	}
	g, calico, err := discover(ctx, b.client)
	if err != nil || !calico {
		return g, err
	}
	slog.Info("Calico API group discovered", "group", string(g), "server", b.client.Server())
	b.group = g
	return g, nil
}

// groupNow is the group a call uses now: the settled one, or v1 until
// discovery settles it (settled false).
func (b *Backend) groupNow() (g kdd.APIGroup, settled bool) {
	b.groupMu.Lock()
	defer b.groupMu.Unlock()
	if b.group == "" {
		return kdd.APIGroupV1, false
	}
	return b.group, true
}

// apiGroup is the group kind k's custom resources are in now; an error
// when that group does not serve k.
func (b *Backend) apiGroup(k kdd.Kind) (kdd.APIGroup, error) {
	g, _ := b.groupNow()
	return g, g.Serves(k)
}

// onGroup runs op. While the group is not settled, op runs on v1 (so a
// cluster with Calico's v1 CRDs costs no discovery request, and the CNI
// plugin's first request stays Calico's); if the server then serves no
// such v1 resource, discovery settles the group and, when it is v3, op
// runs once more there. The outcome is Calico's rule's (ChooseAPIGroup).
func (b *Backend) onGroup(ctx context.Context, op func() error) error {
	_, settled := b.groupNow()
	err := op()
	var nr *noResourceError
	if settled || !errors.As(err, &nr) {
		return err
	}
	g, derr := b.APIGroup(ctx)
	switch {
	case derr != nil:
		return fmt.Errorf("%w (and %w)", err, derr)
	case g != kdd.APIGroupV3:
		return err
	}
	return op()
}
