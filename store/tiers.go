package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"

	"github.com/calico-aio/calico-aio/store/api"
)

// tierPolicyPlurals are the kinds whose objects belong to a tier by
// spec.tier ("default" when unset).
var tierPolicyPlurals = []string{"networkpolicies", "globalnetworkpolicies", "stagednetworkpolicies", "stagedglobalnetworkpolicies"}

// TierNotEmptyError refuses deleting a tier that still has policies, as
// Calico does ("Cannot delete a non-empty tier"); it also says how many
// and which.
type TierNotEmptyError struct {
	Tier     string
	Policies []string // "<plural>/[<namespace>/]<name>", sorted
}

func (e *TierNotEmptyError) Error() string {
	shown := e.Policies
	if len(shown) > 5 {
		shown = append(shown[:5:5], "...")
	}
	return fmt.Sprintf("operation delete is not supported on %s: Cannot delete a non-empty tier: tier %q still has %d policies (%s)",
		e.Tier, e.Tier, len(e.Policies), strings.Join(shown, ", "))
}

// checkTierDeletable refuses deleting the default tier, and any tier
// that policies (stored by anyone, staged ones too) still name.
func (c *Client) checkTierDeletable(ctx context.Context, name string) error {
	if name == api.DefaultTierName {
		return fmt.Errorf("operation delete is not supported on %s: Cannot delete default tier", name)
	}
	var in []string
	for _, plural := range tierPolicyPlurals {
		k, _ := api.LookupKind(plural)
		objs, _, err := c.List(ctx, ListOptions{Kind: k.Kind})
		if err != nil {
			return fmt.Errorf("checking tier %s has no policies: %w", name, err)
		}
		for _, o := range objs {
			var v struct {
				Spec struct {
					Tier string `json:"tier"`
				} `json:"spec"`
			}
			if json.Unmarshal(o.Value, &v) != nil {
				continue // not ours to judge; it names no tier we can read
			}
			tier := v.Spec.Tier
			if tier == "" {
				tier = api.DefaultTierName
			}
			if tier == name {
				in = append(in, policyName(plural, o.Key))
			}
		}
	}
	if len(in) == 0 {
		return nil
	}
	sort.Strings(in)
	return &TierNotEmptyError{Tier: name, Policies: in}
}

// EnsureDefaultTiers creates Calico's own tiers ("default", "kube-admin",
// "kube-baseline") that are missing, as calico-node does at start; a
// stored one, whatever it says, is kept.
func (c *Client) EnsureDefaultTiers(ctx context.Context) error {
	for _, t := range api.WellKnownTiers() {
		_, err := c.CreateResource(ctx, t)
		switch {
		case err == nil:
			slog.Info("created tier", "tier", t.Metadata.Name)
		case errors.Is(err, ErrAlreadyExists):
		default:
			return fmt.Errorf("creating tier %s: %w", t.Metadata.Name, err)
		}
	}
	return nil
}

// policyName is "<plural>/[<namespace>/]<name>".
func policyName(plural string, k Key) string {
	if k.Namespace != "" {
		return plural + "/" + k.Namespace + "/" + k.Name
	}
	return plural + "/" + k.Name
}
