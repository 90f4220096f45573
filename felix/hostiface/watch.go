// Package hostiface owns what the agent reads of the host's own
// interfaces: the watch that signals when they change and the detection of
// kube-proxy's IPVS mode from its kube-ipvs0 interface.
package hostiface

import (
	"context"
	"log/slog"
	"net"
	"net/netip"
	"sync/atomic"
	"time"

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

// Watch reports host interface changes in the agent's network
// namespace on C (capacity 1: several changes before the loop looks are
// one signal): kube-ipvs0 coming or going always, and, while the
// rendering reads the host's interfaces (needed), any other interface
// coming, going or changing and any address but a link-local one (every
// veth gets one) coming or going. Workload interfaces are left out: the
// datastore tells of them, and a pod start would otherwise cost an apply.
type Watch struct {
	C chan struct{}
	// Links receives the name of each host interface that comes, goes or
	// changes, whatever needed says ("" after a gap in the subscription:
	// any may have changed); when its buffer is full a name is dropped
	// (the reader re-reads periodically anyway). The pod MTU follows the
	// host interfaces' MTU (felix/node/mtuwatch.go) as they change,
	// instead of listing every interface every 30 s. Workload interfaces
	// are left out here too.
	Links chan string
	// workload is the interfacePrefix in force and needed whether the
	// rendering reads host interfaces; the loop sets both on each apply.
	workload atomic.Pointer[dataplane.IfacePrefixes]
	needed   atomic.Bool
	// ipvsUnknown says kube-ipvs0 may have come or gone since KubeIPVS
	// last looked: set at the start, when the subscription (re)starts,
	// on each kube-ipvs0 event and by RecheckIPVS.
	ipvsUnknown atomic.Bool
}

// NewWatch makes a watch that leaves out the default workload interfaces.
func NewWatch() *Watch {
	w := &Watch{C: make(chan struct{}, 1), Links: make(chan string, 64)}
	w.SetWorkload(dataplane.DefaultIfacePrefixes)
	w.ipvsUnknown.Store(true)
	return w
}

// RecheckIPVS makes the next KubeIPVS look at the kernel again (the
// periodic interface refresh).
func (w *Watch) RecheckIPVS() { w.ipvsUnknown.Store(true) }

// SetWorkload records the workload interface prefixes to leave out.
func (w *Watch) SetWorkload(p dataplane.IfacePrefixes) { w.workload.Store(&p) }

// SetNeeded records whether the rendering reads the host's interfaces.
func (w *Watch) SetNeeded(on bool) { w.needed.Store(on) }

// signal notes a change without blocking.
func (w *Watch) signal() {
	select {
	case w.C <- struct{}{}:
	default:
	}
}

// Run watches link and address changes until ctx ends. A subscription that
// ends early (a receive error, say) is made again after a pause, and a
// change is signalled since some may have been missed meanwhile; the
// periodic re-read covers the pause.
func (w *Watch) Run(ctx context.Context) {
	pause := time.Second
	for {
		began := time.Now()
		w.watch(ctx)
		if time.Since(began) > time.Minute {
			pause = time.Second
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(pause):
		}
		pause = min(2*pause, time.Minute)
		w.signal()
		w.link("")
	}
}

// watch subscribes to link and address changes and passes on those that
// matter until ctx ends or either subscription does.
func (w *Watch) watch(ctx context.Context) {
	sub, stop := context.WithCancel(ctx)
	defer stop()
	onErr := func(err error) {
		if sub.Err() == nil { // the error that ends a closed subscription is no news
			slog.Warn("watching host interfaces", "err", err)
		}
	}
	links, addrs := make(chan netlink.LinkUpdate, 64), make(chan netlink.AddrUpdate, 64)
	if err := netlink.LinkSubscribeWithOptions(links, sub.Done(), netlink.LinkSubscribeOptions{ErrorCallback: onErr}); err != nil {
		onErr(err)
		return
	}
	if err := netlink.AddrSubscribeWithOptions(addrs, sub.Done(), netlink.AddrSubscribeOptions{ErrorCallback: onErr}); err != nil {
		onErr(err)
		return
	}
	// kube-ipvs0 may have come or gone before the subscription began.
	w.ipvsUnknown.Store(true)
	w.signal()
	for {
		select {
		case <-ctx.Done():
			return
		case u, ok := <-links:
			if !ok {
				return
			}
			if u.Attrs().Name == rules.KubeIPVSInterface {
				w.ipvsUnknown.Store(true)
			}
			if w.linkMatters(u.Attrs().Name) {
				w.signal()
			}
			if w.hostLink(u.Attrs().Name) {
				w.link(u.Attrs().Name)
			}
		case u, ok := <-addrs:
			if !ok {
				return
			}
			if w.addrMatters(u.LinkAddress.IP) {
				w.signal()
			}
		}
	}
}

// linkMatters says whether a change of interface name matters.
func (w *Watch) linkMatters(name string) bool {
	return name == rules.KubeIPVSInterface || w.needed.Load() && !w.workload.Load().Match(name)
}

// link passes a host interface's name on to Links without blocking.
func (w *Watch) link(name string) {
	select {
	case w.Links <- name:
	default:
	}
}

// hostLink says whether an interface is the host's own (not a workload's).
func (w *Watch) hostLink(name string) bool { return !w.workload.Load().Match(name) }

// addrMatters says whether a change of address a matters.
func (w *Watch) addrMatters(a net.IP) bool {
	ip, ok := netip.AddrFromSlice(a)
	return ok && w.needed.Load() && !ip.Unmap().IsLinkLocalUnicast()
}
