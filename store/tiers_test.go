package store_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/calico-aio/calico-aio/store"
	"github.com/calico-aio/calico-aio/store/api"
)

// Deleting a tier that policies still name is refused with an error naming
// the tier and how many; once they are gone (or moved) it is deleted. The
// default tier is never deleted.
func TestDeleteTierWithPolicies(t *testing.T) {
	c := storetestClient(t)
	ctx := context.Background()
	create := func(r api.Resource) {
		t.Helper()
		if _, err := c.CreateResource(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	tierKind, _ := api.LookupKind("Tier")
	gnpKind, _ := api.LookupKind("GlobalNetworkPolicy")
	npKind, _ := api.LookupKind("NetworkPolicy")
	order := 100.0
	create(&api.Tier{TypeMeta: api.TypeMeta{Kind: "Tier"}, Metadata: api.ObjectMeta{Name: "security"}, Spec: api.TierSpec{Order: &order}})
	create(&api.GlobalNetworkPolicy{TypeMeta: api.TypeMeta{Kind: "GlobalNetworkPolicy"}, Metadata: api.ObjectMeta{Name: "g1"},
		Spec: api.GlobalNetworkPolicySpec{Tier: "security", Selector: "all()"}})
	create(&api.NetworkPolicy{TypeMeta: api.TypeMeta{Kind: "NetworkPolicy"}, Metadata: api.ObjectMeta{Namespace: "prod", Name: "n1"},
		Spec: api.NetworkPolicySpec{Tier: "security", Selector: "all()"}})
	create(&api.GlobalNetworkPolicy{TypeMeta: api.TypeMeta{Kind: "GlobalNetworkPolicy"}, Metadata: api.ObjectMeta{Name: "elsewhere"},
		Spec: api.GlobalNetworkPolicySpec{Selector: "all()"}})

	_, err := c.DeleteResource(ctx, tierKind, "", "security", "")
	var notEmpty *store.TierNotEmptyError
	if !errors.As(err, &notEmpty) || len(notEmpty.Policies) != 2 {
		t.Fatalf("deleting a tier with 2 policies: %v", err)
	}
	for _, want := range []string{"Cannot delete a non-empty tier", `"security"`, "2 policies", "globalnetworkpolicies/g1", "networkpolicies/prod/n1"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if _, err := c.GetResource(ctx, tierKind, "", "security"); err != nil {
		t.Fatalf("tier gone after a refused delete: %v", err)
	}

	if _, err := c.DeleteResource(ctx, gnpKind, "", "g1", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteResource(ctx, tierKind, "", "security", ""); !errors.As(err, &notEmpty) || len(notEmpty.Policies) != 1 {
		t.Fatalf("deleting a tier with 1 policy: %v", err)
	}
	if _, err := c.DeleteResource(ctx, npKind, "prod", "n1", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteResource(ctx, tierKind, "", "security", ""); err != nil {
		t.Fatalf("deleting the emptied tier: %v", err)
	}

	create(api.WellKnownTier(api.DefaultTierName))
	_, err = c.DeleteResource(ctx, tierKind, "", api.DefaultTierName, "")
	if err == nil || !strings.Contains(err.Error(), "Cannot delete default tier") {
		t.Errorf("deleting the default tier: %v", err)
	}
}

// Calico's own tiers are created when missing, as Calico stores them;
// stored ones are kept as they are.
func TestEnsureDefaultTiers(t *testing.T) {
	c := storetestClient(t)
	ctx := context.Background()
	tierKind, _ := api.LookupKind("Tier")
	// kube-admin already stored, with a label: kept.
	admin := api.WellKnownTier(api.KubeAdminTierName)
	admin.Metadata.Labels = map[string]string{"mine": "yes"}
	if _, err := c.CreateResource(ctx, admin); err != nil {
		t.Fatal(err)
	}
	before, err := c.Get(ctx, store.ResourceKey(tierKind, "", api.KubeAdminTierName))
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := c.EnsureDefaultTiers(ctx); err != nil {
			t.Fatal(err)
		}
	}
	after, err := c.Get(ctx, before.Key)
	if err != nil || after.Revision != before.Revision {
		t.Errorf("stored kube-admin rewritten: revision %s -> %s (%v)", before.Revision, after.Revision, err)
	}
	want := map[string]string{
		"default":       `"spec":{"order":1000000,"defaultAction":"Deny"},"status":{}}`,
		"kube-admin":    `"spec":{"order":1000,"defaultAction":"Pass"},"status":{}}`,
		"kube-baseline": `"spec":{"order":10000000,"defaultAction":"Pass"},"status":{}}`,
	}
	kvs, _, err := c.List(ctx, store.ListOptions{Kind: "Tier"})
	if err != nil {
		t.Fatal(err)
	}
	if len(kvs) != len(want) {
		t.Errorf("%d tiers stored, want %d", len(kvs), len(want))
	}
	for _, kv := range kvs {
		name := kv.Key.Name
		if !strings.HasSuffix(string(kv.Value), want[name]) || !strings.Contains(string(kv.Value), `"uid":"`) {
			t.Errorf("tier %s stored as %s; want it to end %s", name, kv.Value, want[name])
		}
	}
}
