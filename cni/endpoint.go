package cni

import (
	"context"
	"errors"
	"net/netip"

	"github.com/calico-aio/calico-aio/store"
	"github.com/calico-aio/calico-aio/store/api"
)

var (
	wepKind, _     = api.LookupKind("WorkloadEndpoint")
	profileKind, _ = api.LookupKind("Profile")
)

// buildEndpoint is the WorkloadEndpoint of a wired pod interface.
func buildEndpoint(id identity, node string, addrs []netip.Addr, mac string, profiles []string) *api.WorkloadEndpoint {
	w := wepKind.NewObject().(*api.WorkloadEndpoint)
	w.Metadata.Name, w.Metadata.Namespace = id.endpoint, id.namespace
	w.Metadata.Labels = map[string]string{
		api.LabelNamespace:    id.namespace,
		api.LabelOrchestrator: id.orchestrator,
	}
	w.Spec.Orchestrator = id.orchestrator
	w.Spec.Node = node
	w.Spec.ContainerID = id.containerID
	w.Spec.Endpoint = id.ifName
	if id.orchestrator == OrchestratorK8s {
		w.Spec.Pod = id.pod
		w.Spec.Workload = ""
	}
	for _, a := range addrs {
		w.Spec.IPNetworks = append(w.Spec.IPNetworks, netip.PrefixFrom(a, a.BitLen()).String())
	}
	w.Spec.InterfaceName = id.hostVeth
	w.Spec.MAC = mac
	w.Spec.Profiles = profiles
	return w
}

// profilesFor are the profiles a pod gets: for plain CNI without a policy
// type, the one named after the network; for Kubernetes, its namespace's.
func profilesFor(conf *NetConf, id identity) []string {
	if id.orchestrator == OrchestratorK8s {
		return []string{"kns." + id.namespace}
	}
	if conf.Policy.Type == "" {
		return []string{conf.Name}
	}
	return nil
}

// ensureProfile creates a missing profile the way Calico does for a plain
// CNI network: ingress allowed from endpoints carrying the network's label,
// egress allowed, and the label applied to members. A Kubernetes namespace
// profile allows everything until the policy controller refines it.
func ensureProfile(ctx context.Context, cl *store.Client, name string, k8s bool) error {
	return ensureProfileWith(ctx, cl, name, func() *api.Profile { return newProfile(name, k8s) })
}

// ensureProfileWith creates profile name as build makes it, unless it
// exists; build runs only when it does not.
func ensureProfileWith(ctx context.Context, cl *store.Client, name string, build func() *api.Profile) error {
	if _, err := cl.Get(ctx, store.ResourceKey(profileKind, "", name)); err == nil || !errors.Is(err, store.ErrNotFound) {
		return err
	}
	if _, err := cl.CreateResource(ctx, build()); err != nil && !errors.Is(err, store.ErrAlreadyExists) {
		return err
	}
	return nil
}

// newProfile is the profile ensureProfile creates.
func newProfile(name string, k8s bool) *api.Profile {
	p := profileKind.NewObject().(*api.Profile)
	p.Metadata.Name = name
	if k8s {
		p.Spec.Ingress = []api.Rule{{Action: api.ActionAllow}}
	} else {
		p.Spec.Ingress = []api.Rule{{Action: api.ActionAllow, Source: api.EntityRule{Selector: "has(" + name + ")"}}}
		p.Spec.LabelsToApply = map[string]string{name: ""}
	}
	p.Spec.Egress = []api.Rule{{Action: api.ActionAllow}}
	return p
}
