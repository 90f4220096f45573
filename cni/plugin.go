package cni

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"

	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/calico-aio/calico-aio/build/version"
	"github.com/calico-aio/calico-aio/ipam"
	"github.com/calico-aio/calico-aio/k8s"
	"github.com/calico-aio/calico-aio/store"
	"github.com/calico-aio/calico-aio/store/api"
)

// Main runs the "calico" CNI plugin under skel and returns the exit code.
func Main() int {
	p := &plugin{backend{out: os.Stdout}}
	funcs := skel.CNIFuncs{Add: p.add, Del: p.del, Check: p.check, GC: p.gc, Status: p.status}
	if err := skel.PluginMainFuncsWithError(funcs, Versions, "calico "+version.Version); err != nil {
		if perr := err.Print(); perr != nil {
			slog.Error("printing CNI error", "err", perr)
		}
		return 1
	}
	return 0
}

type plugin struct{ backend }

func (p *plugin) add(a *skel.CmdArgs) (err error) {
	s, err := p.newSession(a)
	if err != nil {
		return err
	}
	defer s.close()
	if err := s.conf.checkNodenameFile(); err != nil {
		return err
	}
	if err := s.conf.waitForGates(); err != nil {
		return err
	}
	ctx := context.Background()
	id := newIdentity(s.node, a.ContainerID, a.IfName, s.args)
	r := s.firstReads(ctx, a.StdinData, id)
	if err := r.ready(); err != nil {
		return err
	}

	// A repeated ADD of the same container returns what exists, once
	// its host side is seen wired (an ADD cut short may have written the
	// endpoint first: kdd_early.go); else it is done again, in full.
	if wep, err := r.existing(); err != nil {
		return err
	} else if wep != nil && wiredHost(wep) {
		s.conf.waitForPolicy(wep)
		return p.print(endpointResult(wep, a.Netns), s.conf.CNIVersion)
	}

	// A Kubernetes pod is read (and its annotations checked) before
	// anything is allocated: an API failure leaves nothing behind.
	var kp *kubePod
	if s.usesKubernetes(id) {
		if kp, err = r.pod(); err != nil {
			return err
		}
	} else if err := checkPodCIDRWithoutAPI(s.conf, a.StdinData); err != nil {
		return err
	}

	mtu, err := s.conf.PodMTU() // cni/mtu.go: netconf mtu, else <lib>/mtu
	if err != nil {
		return err
	}
	w := podWiring{netns: a.Netns, ifName: a.IfName, mtu: mtu,
		iface: id.hostIface(NodeClaimsSource(ctx, s.cl, s.node)), allowForwarding: s.conf.ContainerSettings.AllowIPForwarding,
		routes: s.conf.podRoutes(), queues: s.conf.numQueues()}
	if kp != nil {
		w.podMAC = kp.mac
	}
	// The veth pair needs no address: it is made while they are allocated.
	pair := w.start()
	defer func() {
		if err != nil {
			pair.abandon()
		}
	}()
	addrs, blockRoutes, release, err := s.allocateAddrs(ctx, a, id, kp)
	if err != nil {
		return err
	}
	crashIf(faultAfterIPAM)
	defer func() {
		if err != nil {
			release()
		}
	}()

	early, err := s.startEndpointWrite(ctx, id, kp, addrs) // cni/kdd_early.go
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			early.undo(ctx, s, id)
		}
	}()

	w.addrs = addrs
	mac, err := w.finish(pair)
	if err != nil {
		return wiringError(err)
	}
	defer func() {
		if err != nil {
			_ = RemoveHostIface("", a.Netns, a.IfName)
		}
	}()
	id.hostVeth = w.hostVeth
	crashIf(faultAfterWiring)

	wep, err := s.endpointFor(ctx, id, kp, addrs, mac)
	if err != nil {
		return err
	}
	if err := early.finish(ctx, s, s.storedEndpoint(wep)); err != nil {
		return err
	}
	s.conf.waitForPolicy(wep)
	slog.Debug("pod network set up", "endpoint", wep.Metadata.Name, "interface", wep.Spec.InterfaceName, "ips", wep.Spec.IPNetworks)
	return p.print(endpointResult(wep, a.Netns, blockRoutes...), s.conf.CNIVersion)
}

// endpointFor builds the pod's endpoint and makes sure its profiles exist.
func (s *session) endpointFor(ctx context.Context, id identity, kp *kubePod, addrs []netip.Addr, mac string) (*api.WorkloadEndpoint, error) {
	if kp != nil {
		// On Kubernetes the kns./ksa. profiles are derived, never written.
		if !s.kdd() {
			if err := s.ensureKubeProfiles(ctx, kp); err != nil {
				return nil, err
			}
		}
		wep := buildEndpoint(id, s.node, addrs, mac, k8s.PodProfiles(kp.pod))
		return wep, kp.applyTo(wep, addrs)
	}
	profiles := profilesFor(s.conf, id)
	for _, name := range profiles {
		if err := ensureProfile(ctx, s.cl, name, id.orchestrator == OrchestratorK8s); err != nil {
			return nil, types.NewError(types.ErrTryAgainLater, "creating profile "+name, err.Error())
		}
	}
	return buildEndpoint(id, s.node, addrs, mac, profiles), nil
}

// existingEndpoint returns the pod's endpoint when it exists for this very
// container (nil otherwise).
func (s *session) existingEndpoint(ctx context.Context, id identity) (*api.WorkloadEndpoint, error) {
	r, err := s.cl.GetResource(ctx, wepKind, id.namespace, id.endpoint)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		// Unreachable, or (on Kubernetes) a pod whose endpoint does not convert.
		return nil, types.NewError(types.ErrTryAgainLater, "reading WorkloadEndpoint "+id.namespace+"/"+id.endpoint+" from the datastore", err.Error())
	}
	wep := r.(*api.WorkloadEndpoint)
	if wep.Spec.ContainerID != id.containerID || s.kdd() && !addressed(wep) {
		return nil, nil
	}
	return wep, nil
}

// allocateAddrs gets the pod's addresses: in-process for calico-ipam, by
// exec of the configured plugin otherwise. release undoes it.
func (s *session) allocateAddrs(ctx context.Context, a *skel.CmdArgs, id identity, kp *kubePod) ([]netip.Addr, []netip.Prefix, func(), error) {
	if kp != nil && kp.noIPAM != nil {
		return kp.noIPAM, nil, func() {}, nil
	}
	if s.conf.IPAM.Type != "calico-ipam" {
		stdin := a.StdinData
		if kp != nil && kp.ipamStdin != nil {
			stdin = kp.ipamStdin
		}
		addrs, release, err := s.delegateIPAM(ctx, stdin)
		return addrs, nil, release, err
	}
	handle := handleID(s.conf.Name, a.ContainerID)
	lock, err := lockFile(s.lockPath())
	if err != nil {
		return nil, nil, nil, types.NewError(types.ErrIOFailure, "IPAM lock", err.Error())
	}
	s.replayJournal(ctx)
	attrs := map[string]string{}
	if id.orchestrator == OrchestratorK8s {
		attrs[ipam.AttrNamespace], attrs[ipam.AttrPod] = id.namespace, id.pod
	}
	conf, args := kp.ipamInputs(s.conf, s.args)
	got, err := allocate(ctx, s.al, conf, args, s.node, handle, attrs)
	lock.unlock()
	if err != nil {
		return nil, nil, nil, err
	}
	release := func() {
		if _, err := s.al.ReleaseByHandle(context.Background(), handle); err != nil {
			slog.Error("releasing addresses after a failed ADD; journaling", "handle", handle, "err", err)
			_ = s.conf.journal(pendingDelete{Handle: handle})
		}
	}
	return got.Addrs(), resultIPs(got), release, nil
}

// delegateIPAM runs another IPAM plugin (host-local, ...) as the spec says.
func (s *session) delegateIPAM(ctx context.Context, stdin []byte) ([]netip.Addr, func(), error) {
	r, err := invoke.DelegateAdd(ctx, s.conf.IPAM.Type, stdin, nil)
	if err != nil {
		return nil, nil, err
	}
	release := func() { _ = invoke.DelegateDel(context.Background(), s.conf.IPAM.Type, stdin, nil) }
	res, err := current.NewResultFromResult(r)
	if err != nil {
		release()
		return nil, nil, types.NewError(types.ErrDecodingFailure, "IPAM result", err.Error())
	}
	var out []netip.Addr
	for _, ip := range res.IPs {
		if addr, ok := netip.AddrFromSlice(ip.Address.IP); ok {
			out = append(out, addr.Unmap())
		}
	}
	if len(out) == 0 {
		release()
		return nil, nil, types.NewError(types.ErrInternal, fmt.Sprintf("IPAM plugin %s returned no addresses", s.conf.IPAM.Type), "")
	}
	return out, release, nil
}

func wiringError(err error) error {
	var taken *InterfaceTakenError
	var route *RouteTakenError
	switch {
	case errors.As(err, &taken), errors.As(err, &route):
		return types.NewError(types.ErrInternal, err.Error(), "")
	}
	return types.NewError(types.ErrInternal, "pod network setup failed", err.Error())
}

// writeEndpoint creates the endpoint, or replaces one left by an earlier
// container of the same pod.
func (s *session) writeEndpoint(ctx context.Context, wep *api.WorkloadEndpoint) error {
	_, err := s.cl.CreateResource(ctx, wep)
	if errors.Is(err, store.ErrAlreadyExists) {
		_, err = s.cl.UpdateResource(ctx, wep)
	}
	if err != nil {
		return types.NewError(types.ErrTryAgainLater, "writing WorkloadEndpoint "+wep.Metadata.Name, err.Error())
	}
	return nil
}

// endpointResult is the CNI result for an endpoint: the host and pod
// interfaces, the pod's /32 (/128) addresses, and a route per address
// calico-ipam allocated, as Calico's result has: its destination the
// address with its block's mask (10.244.166.129/26), host bits kept.
func endpointResult(wep *api.WorkloadEndpoint, netns string, blockRoutes ...netip.Prefix) *current.Result {
	idx := 1
	r := &current.Result{
		CNIVersion: current.ImplementedSpecVersion,
		Interfaces: []*current.Interface{
			{Name: wep.Spec.InterfaceName, Mac: hostMAC.String()},
			{Name: wep.Spec.Endpoint, Mac: wep.Spec.MAC, Sandbox: netns},
		},
	}
	for _, n := range wep.Spec.IPNetworks {
		p, err := netip.ParsePrefix(n)
		if err != nil {
			continue
		}
		r.IPs = append(r.IPs, &current.IPConfig{Interface: &idx, Address: ipNet(p)})
	}
	for _, p := range blockRoutes {
		r.Routes = append(r.Routes, &types.Route{Dst: ipNet(p)})
	}
	return r
}

// ipNet is p as a net.IPNet, its address's host bits kept.
func ipNet(p netip.Prefix) net.IPNet {
	return net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}
