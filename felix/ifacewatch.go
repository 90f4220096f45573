package felix

import (
	"context"
	"log/slog"
	"net"
	"net/netip"
	"sync/atomic"

	"github.com/vishvananda/netlink"

	"github.com/calico-aio/calico-aio/felix/dataplane"
	"github.com/calico-aio/calico-aio/felix/rules"
)

// Host interface changes. What the agent renders from the host's own
// interfaces (kube-proxy IPVS mode while kube-ipvs0 exists and its
// this-host IP set; host endpoints found by expectedIPs or "*") follows
// them as they happen, as Calico's interface monitor makes Felix react,
// instead of waiting for the interfaceRefreshInterval re-read (90 s by
// default), which stays as the fallback.

// ifaceWatch reports host interface changes in the agent's network
// namespace on C (capacity 1: several changes before the loop looks are
// one signal): kube-ipvs0 coming or going always, and, while the
// rendering reads the host's interfaces (needed), any other interface
// coming, going or changing and any address but a link-local one (every
// veth gets one) coming or going. Workload interfaces are left out: the
// datastore tells of them, and a pod start would otherwise cost an apply.
type ifaceWatch struct {
	C chan struct{}
	// workload is the interfacePrefix in force and needed whether the
	// rendering reads host interfaces; the loop sets both on each apply.
	workload atomic.Pointer[dataplane.IfacePrefixes]
	needed   atomic.Bool
}

func newIfaceWatch() *ifaceWatch {
	w := &ifaceWatch{C: make(chan struct{}, 1)}
	w.setWorkload(dataplane.DefaultIfacePrefixes)
	return w
}

// setWorkload records the workload interface prefixes to leave out.
func (w *ifaceWatch) setWorkload(p dataplane.IfacePrefixes) { w.workload.Store(&p) }

// signal notes a change without blocking.
func (w *ifaceWatch) signal() {
	select {
	case w.C <- struct{}{}:
	default:
	}
}

// run subscribes to link and address changes until ctx ends. Without a
// subscription (an error is logged) the periodic re-read still applies.
func (w *ifaceWatch) run(ctx context.Context) {
	links, addrs := make(chan netlink.LinkUpdate, 64), make(chan netlink.AddrUpdate, 64)
	onErr := func(err error) { slog.Warn("watching host interfaces", "err", err) }
	if err := netlink.LinkSubscribeWithOptions(links, ctx.Done(), netlink.LinkSubscribeOptions{ErrorCallback: onErr}); err != nil {
		onErr(err)
		links = nil
	}
	if err := netlink.AddrSubscribeWithOptions(addrs, ctx.Done(), netlink.AddrSubscribeOptions{ErrorCallback: onErr}); err != nil {
		onErr(err)
		addrs = nil
	}
	for {
		select {
		case <-ctx.Done():
			return
		case u, ok := <-links:
			if !ok {
				links = nil
				continue
			}
			if w.linkMatters(u.Attrs().Name) {
				w.signal()
			}
		case u, ok := <-addrs:
			if !ok {
				addrs = nil
				continue
			}
			if w.addrMatters(u.LinkAddress.IP) {
				w.signal()
			}
		}
	}
}

// linkMatters says whether a change of interface name matters.
func (w *ifaceWatch) linkMatters(name string) bool {
	return name == rules.KubeIPVSInterface || w.needed.Load() && !w.workload.Load().Match(name)
}

// addrMatters says whether a change of address a matters.
func (w *ifaceWatch) addrMatters(a net.IP) bool {
	ip, ok := netip.AddrFromSlice(a)
	return ok && w.needed.Load() && !ip.Unmap().IsLinkLocalUnicast()
}
