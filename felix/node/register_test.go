package node

import (
	"context"
	"net/netip"
	"slices"
	"testing"

	"github.com/calico-aio/calico-aio/store/api"
	"github.com/calico-aio/calico-aio/store/storetest"
)

func TestWithK8sRef(t *testing.T) {
	mesos := api.OrchRef{NodeName: "m", Orchestrator: "mesos"}
	for _, tc := range []struct{ in, want []api.OrchRef }{
		{nil, []api.OrchRef{{NodeName: "k1", Orchestrator: "k8s"}}},
		{[]api.OrchRef{mesos}, []api.OrchRef{mesos, {NodeName: "k1", Orchestrator: "k8s"}}},
		{[]api.OrchRef{{NodeName: "old", Orchestrator: "k8s"}, mesos}, []api.OrchRef{{NodeName: "k1", Orchestrator: "k8s"}, mesos}},
	} {
		in := slices.Clone(tc.in)
		if got := withK8sRef(tc.in, "k1"); !slices.Equal(got, tc.want) {
			t.Errorf("withK8sRef(%v) = %v, want %v", tc.in, got, tc.want)
		}
		if !slices.Equal(in, tc.in) {
			t.Errorf("withK8sRef modified its input: %v", tc.in)
		}
	}
}

func TestRegisterNodeOrchRef(t *testing.T) {
	ctx := context.Background()
	cl := storetest.StartEtcd(t).Client(t)
	k, _ := api.LookupKind("Node")
	v4 := netip.MustParsePrefix("192.0.2.1/24")
	refs := func() []api.OrchRef {
		t.Helper()
		r, err := cl.GetResource(ctx, k, "", "n1")
		if err != nil {
			t.Fatal(err)
		}
		return r.(*api.Node).Spec.OrchRefs
	}
	if err := Register(ctx, cl, "n1", "", v4, netip.Prefix{}, 0); err != nil {
		t.Fatal(err)
	}
	if got := refs(); len(got) != 0 {
		t.Errorf("without CALICO_K8S_NODE_REF: orchRefs %v", got)
	}
	want := []api.OrchRef{{NodeName: "k1", Orchestrator: "k8s"}}
	for range 2 { // again: unchanged
		if err := Register(ctx, cl, "n1", "k1", v4, netip.Prefix{}, 0); err != nil {
			t.Fatal(err)
		}
		if got := refs(); !slices.Equal(got, want) {
			t.Errorf("orchRefs %v, want %v", got, want)
		}
	}
	// A restart without the variable keeps what is there.
	if err := Register(ctx, cl, "n1", "", v4, netip.Prefix{}, 0); err != nil {
		t.Fatal(err)
	}
	if got := refs(); !slices.Equal(got, want) {
		t.Errorf("after a restart without a node ref: orchRefs %v", got)
	}
}
