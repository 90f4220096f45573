package cni

import (
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"syscall"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"

	"github.com/calico-aio/calico-aio/store/api"
	"github.com/calico-aio/calico-aio/store/kdd/derive"
)

// This file exports the CNI wiring for calicoctl's classic verbs
// ("container add" and friends), so that a container attached by hand is
// wired, and described in the datastore, exactly as a CNI pod is.

// Orchestrators of workloads attached by calicoctl.
const (
	OrchestratorDocker    = "docker"    // a Docker container, by its ID
	OrchestratorNamespace = "namespace" // a network namespace, by path or PID
)

// EndpointNamespace is the WorkloadEndpoint namespace of every workload
// that is not a Kubernetes pod.
const EndpointNamespace = "default"

// Workload is one interface of a workload attached outside CNI.
type Workload struct {
	Node         string
	Orchestrator string // OrchestratorDocker or OrchestratorNamespace
	ID           string // Docker container ID, netns name or "pid-<N>"
	IfName       string // the interface inside the workload
	// HostIface is the host end's name: the one Attach chose, or the one
	// the workload's endpoint records. Empty, the first choice stands in.
	HostIface string
}

// identity names the workload the way Calico does: endpoint
// <node>-<orchestrator>-<workload>-<iface> ('-' doubled in each part);
// host veth "cali" + the Docker container ID prefix, or for other
// workloads the prefix of sha1("<orchestrator>.<workload>.<iface>"), as
// the first choice (see HostIface), or HostIface when set.
func (w Workload) identity() identity {
	id := identity{
		orchestrator: w.Orchestrator, namespace: EndpointNamespace, containerID: w.ID, ifName: w.IfName,
		endpoint: derive.EndpointName(w.Node, w.Orchestrator, w.ID, w.IfName),
	}
	short := w.ID
	if w.Orchestrator != OrchestratorDocker {
		sum := sha1.Sum([]byte(w.Orchestrator + "." + w.ID + "." + w.IfName))
		short = hex.EncodeToString(sum[:])
	}
	if len(short) > 11 {
		short = short[:11]
	}
	id.hostVeth = "cali" + short
	if w.HostIface != "" {
		id.hostVeth = w.HostIface
	}
	return id
}

// EndpointName is the workload's WorkloadEndpoint name (in EndpointNamespace).
func (w Workload) EndpointName() string { return w.identity().endpoint }

// HostVeth is the host side of the workload's veth pair: HostIface, or
// the first choice when that is not known.
func (w Workload) HostVeth() string { return w.identity().hostVeth }

// Endpoint is the WorkloadEndpoint of the wired workload, as the CNI plugin
// writes it, with spec.workload set to the workload ID.
func (w Workload) Endpoint(addrs []netip.Addr, mac string, profiles []string) *api.WorkloadEndpoint {
	wep := buildEndpoint(w.identity(), w.Node, addrs, mac, profiles)
	wep.Spec.Workload = w.ID
	return wep
}

// Attach wires the workload in network namespace netns as CNI ADD does (the
// 169.254.1.1 veth wiring, host sysctls and host routes) and returns the
// workload-side MAC. The host end's name is chosen as HostIface says,
// given what the node's endpoints record (claims, read only when needed), and set in
// w.HostIface. On error nothing it created is left. A host route of an
// address to another interface is a *RouteTakenError, an existing
// interface of the same name in the namespace an *InterfaceTakenError.
func (w *Workload) Attach(netns string, mtu int, addrs []netip.Addr, claims ClaimsSource) (string, error) {
	w.HostIface = ""
	id := w.identity()
	pw := podWiring{netns: netns, ifName: w.IfName, mtu: mtu, addrs: addrs,
		iface: id.hostIface(claims)}
	mac, err := pw.setup()
	if err != nil {
		return "", err
	}
	w.HostIface = pw.hostVeth
	return mac, nil
}

// Detach removes the workload's veth pair and with it its host routes: the
// peer of its interface in netns ("" or gone when the workload has
// stopped), else HostIface unless that is provably another workload's
// (see RemoveHostIface). It is idempotent.
func (w Workload) Detach(netns string) error { return RemoveHostIface(w.HostIface, netns, w.IfName) }

// AddAddrs adds addresses to an attached workload: on its interface (with
// the gateway routes of a family it did not have yet) and as host routes.
// On error it undoes what it did.
func (w Workload) AddAddrs(netns string, addrs []netip.Addr) (err error) {
	pw := podWiring{netns: netns, ifName: w.IfName, hostVeth: w.HostVeth(), addrs: addrs}
	target, err := ns.GetNS(netns)
	if err != nil {
		return fmt.Errorf("opening network namespace %s: %w", netns, err)
	}
	defer target.Close()
	if err := pw.checkHostRoutes(); err != nil {
		return err
	}
	host, err := netlink.LinkByName(pw.hostVeth)
	if err != nil {
		return fmt.Errorf("host veth %s: %w", pw.hostVeth, err)
	}
	if err := pw.hostSysctls(); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = w.RemoveAddrs(netns, addrs)
		}
	}()
	err = target.Do(func(ns.NetNS) error { return pw.addPodAddrs() })
	if err != nil {
		return err
	}
	return pw.addHostRoutes(host)
}

// addPodAddrs runs inside the workload namespace.
func (w podWiring) addPodAddrs() error {
	link, err := netlink.LinkByName(w.ifName)
	if err != nil {
		return fmt.Errorf("workload interface %s: %w", w.ifName, err)
	}
	if w.has6() {
		if err := writeSysctl("net/ipv6/conf/all/disable_ipv6", "0"); err != nil {
			return err
		}
		_ = writeSysctl("net/ipv6/conf/"+w.ifName+"/accept_dad", "0")
	}
	for _, a := range w.addrs {
		if err := netlink.AddrAdd(link, podAddr(a)); err != nil && !errors.Is(err, syscall.EEXIST) {
			return fmt.Errorf("adding %s to %s: %w", a, w.ifName, err)
		}
	}
	for _, r := range gatewayRoutes(link.Attrs().Index, w.has4(), w.has6()) {
		if err := netlink.RouteReplace(r); err != nil {
			return fmt.Errorf("adding workload route %s via %v: %w", r.Dst, r.Gw, err)
		}
	}
	return nil
}

// RemoveAddrs removes addresses from an attached workload: from its
// interface (with the gateway routes of a family it no longer has) and
// their host routes. Addresses already gone are fine, and so is a
// namespace that no longer exists.
func (w Workload) RemoveAddrs(netns string, addrs []netip.Addr) error {
	var errs []error
	// Without the host veth its routes are gone too; a route to the same
	// address elsewhere is someone else's.
	if host, err := netlink.LinkByName(w.HostVeth()); err == nil {
		for _, a := range addrs {
			r := &netlink.Route{LinkIndex: host.Attrs().Index, Dst: hostPrefix(a)}
			if err := netlink.RouteDel(r); err != nil && !errors.Is(err, syscall.ESRCH) {
				errs = append(errs, fmt.Errorf("deleting host route %s: %w", a, err))
			}
		}
	}
	target, err := ns.GetNS(netns)
	if err != nil {
		return errors.Join(errs...) // no namespace, no workload side to clean
	}
	defer target.Close()
	err = target.Do(func(ns.NetNS) error {
		link, err := netlink.LinkByName(w.IfName)
		if err != nil {
			return nil // the interface is gone with its addresses
		}
		for _, a := range addrs {
			if err := netlink.AddrDel(link, &netlink.Addr{IPNet: hostPrefix(a)}); err != nil &&
				!errors.Is(err, syscall.EADDRNOTAVAIL) && !errors.Is(err, syscall.ENOENT) {
				return fmt.Errorf("removing %s from %s: %w", a, w.IfName, err)
			}
		}
		left, err := netlink.AddrList(link, netlink.FAMILY_ALL)
		if err != nil {
			return err
		}
		var has4, has6 bool
		for _, l := range left {
			if l.IP.IsLinkLocalUnicast() {
				continue
			}
			if l.IP.To4() != nil {
				has4 = true
			} else {
				has6 = true
			}
		}
		for _, r := range gatewayRoutes(link.Attrs().Index, !has4, !has6) {
			if err := netlink.RouteDel(r); err != nil && !errors.Is(err, syscall.ESRCH) {
				return fmt.Errorf("deleting workload route %s: %w", r.Dst, err)
			}
		}
		return nil
	})
	return errors.Join(append(errs, err)...)
}

// NetworkProfile is the profile the CNI plugin creates for a plain CNI
// network, and classic "calicoctl profile add" for a named group: members
// get the label NAME="" (the classic tag), inbound traffic is allowed from
// members, outbound traffic is allowed.
func NetworkProfile(name string) *api.Profile { return newProfile(name, false) }
