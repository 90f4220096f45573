package dataplane

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// DefaultNetlinkTimeout is Felix's netlinkTimeout default.
const DefaultNetlinkTimeout = 10 * time.Second

// nlHandle is the dataplane's own rtnetlink socket (FelixConfiguration
// netlinkTimeout). The netlink package's functions share one default
// handle whose timeout is a process-wide variable, read also by the CNI
// server's and BGP's goroutines; the dataplane never uses them, so its
// timeout is its own. Every manager holds the same *nlHandle and calls
// through h; only the dataplane's goroutine replaces h, between steps.
type nlHandle struct {
	h nlOps
	// raw is the library's handle behind h (its socket's options).
	raw *netlink.Handle
	// wrap, when set, wraps each new handle (tests count requests).
	wrap func(nlOps) nlOps
	// want is the timeout asked for (Desired.NetlinkTimeout); ready
	// makes h match it.
	want time.Duration
	// ns is the network namespace h's socket lives in (the one the
	// dataplane ran in when h was made), timeout what h was made with.
	ns      netns.NsHandle
	timeout time.Duration
	// held: the dataplane's apply has made h ready and holds it so until
	// it ends; the managers' ready calls then cost nothing.
	held bool
	// links is the apply's link dump by name (linkdump.go; nil: none
	// taken yet).
	links map[string]netlink.Link
	// looked is what link requested by name during the apply.
	looked map[string]netlink.Link
}

// nlOps are the rtnetlink requests the managers make, as *netlink.Handle
// has them; nlHandle.wrap may put a wrapper in between.
type nlOps interface {
	AddrAdd(link netlink.Link, addr *netlink.Addr) error
	AddrDel(link netlink.Link, addr *netlink.Addr) error
	AddrList(link netlink.Link, family int) ([]netlink.Addr, error)
	FilterDel(filter netlink.Filter) error
	FilterList(link netlink.Link, parent uint32) ([]netlink.Filter, error)
	FilterReplace(filter netlink.Filter) error
	LinkAdd(link netlink.Link) error
	LinkByIndex(index int) (netlink.Link, error)
	LinkByName(name string) (netlink.Link, error)
	LinkDel(link netlink.Link) error
	LinkList() ([]netlink.Link, error)
	LinkSetHardwareAddr(link netlink.Link, hwaddr net.HardwareAddr) error
	LinkSetMTU(link netlink.Link, mtu int) error
	LinkSetUp(link netlink.Link) error
	NeighDel(neigh *netlink.Neigh) error
	NeighList(linkIndex, family int) ([]netlink.Neigh, error)
	NeighSet(neigh *netlink.Neigh) error
	QdiscAdd(qdisc netlink.Qdisc) error
	QdiscDel(qdisc netlink.Qdisc) error
	QdiscList(link netlink.Link) ([]netlink.Qdisc, error)
	QdiscReplace(qdisc netlink.Qdisc) error
	RouteAdd(route *netlink.Route) error
	RouteDel(route *netlink.Route) error
	RouteReplace(route *netlink.Route) error
	RouteListFiltered(family int, filter *netlink.Route, filterMask uint64) ([]netlink.Route, error)
}

func newNLHandle() *nlHandle { return &nlHandle{ns: netns.None()} }

// ready makes h usable in the calling thread's namespace with the wanted
// timeout; managers call it at the start of their apply and use h until
// it returns.
func (n *nlHandle) ready() error {
	if n.held {
		return nil
	}
	return n.ensure(n.want)
}

// effectiveTimeout maps the Desired value to a socket timeout: 0 is the
// default, negative none (0 on the socket: block).
func effectiveTimeout(d time.Duration) time.Duration {
	switch {
	case d == 0:
		return DefaultNetlinkTimeout
	case d < 0:
		return 0
	case d < time.Microsecond: // the socket's granularity
		return time.Microsecond
	}
	return d
}

// ensure makes h a socket in the calling thread's network namespace with
// the given timeout (see effectiveTimeout); a handle made for another
// timeout or namespace is replaced and closed.
func (n *nlHandle) ensure(timeout time.Duration) error {
	timeout = effectiveTimeout(timeout)
	cur, err := netns.Get()
	if err != nil {
		return fmt.Errorf("netlink handle: reading the network namespace: %w", err)
	}
	if n.h != nil && n.timeout == timeout && n.ns.Equal(cur) {
		_ = cur.Close()
		return nil
	}
	h, err := netlink.NewHandle(unix.NETLINK_ROUTE)
	if err != nil {
		_ = cur.Close()
		return fmt.Errorf("netlink handle: %w", err)
	}
	if timeout > 0 {
		if err := h.SetSocketTimeout(timeout); err != nil {
			h.Close()
			_ = cur.Close()
			return fmt.Errorf("netlink handle: setting netlinkTimeout %s: %w", timeout, err)
		}
	}
	if n.h != nil {
		slog.Info("netlink handle replaced", "netlinkTimeout", timeout, "was", n.timeout)
	}
	n.close()
	n.h, n.raw, n.ns, n.timeout = h, h, cur, timeout
	if n.wrap != nil {
		n.h = n.wrap(h)
	}
	return nil
}

// close releases the socket.
func (n *nlHandle) close() {
	if n.h != nil {
		n.raw.Close()
		_ = n.ns.Close()
		n.h, n.raw, n.ns = nil, nil, netns.None()
	}
}

// NetlinkTimeout is the timeout of the netlink socket the dataplane uses
// now (0: none, or no socket yet).
func (d *Dataplane) NetlinkTimeout() time.Duration {
	if d.nl.h == nil {
		return 0
	}
	return d.nl.timeout
}

// routesOn lists the main table's routes of family fam that leave through
// the interface with index link. With the socket's strict checking on for
// the request, the kernel sends only those (without it, every route of
// the table, filtered here): one interface's routes cost what that
// interface has, not what the node has.
func (n *nlHandle) routesOn(fam, link int) ([]netlink.Route, error) {
	if err := n.raw.SetStrictCheck(true); err != nil {
		return nil, fmt.Errorf("netlink strict checking: %w", err)
	}
	defer func() { _ = n.raw.SetStrictCheck(false) }()
	var err error
	for i := 0; i < 5; i++ {
		var rs []netlink.Route
		rs, err = n.h.RouteListFiltered(fam, &netlink.Route{Table: unix.RT_TABLE_MAIN, LinkIndex: link},
			netlink.RT_FILTER_TABLE|netlink.RT_FILTER_OIF)
		if err == nil || !errors.Is(err, netlink.ErrDumpInterrupted) {
			return rs, err
		}
	}
	return nil, fmt.Errorf("route dump of interface %d: %w", link, err)
}
