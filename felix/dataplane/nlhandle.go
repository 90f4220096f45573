package dataplane

import (
	"fmt"
	"log/slog"
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
	h *netlink.Handle
	// want is the timeout asked for (Desired.NetlinkTimeout); ready
	// makes h match it.
	want time.Duration
	// ns is the network namespace h's socket lives in (the one the
	// dataplane ran in when h was made), timeout what h was made with.
	ns      netns.NsHandle
	timeout time.Duration
}

func newNLHandle() *nlHandle { return &nlHandle{ns: netns.None()} }

// ready makes h usable in the calling thread's namespace with the wanted
// timeout; managers call it at the start of their apply and use h until
// it returns.
func (n *nlHandle) ready() error { return n.ensure(n.want) }

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
	n.h, n.ns, n.timeout = h, cur, timeout
	return nil
}

// close releases the socket.
func (n *nlHandle) close() {
	if n.h != nil {
		n.h.Close()
		_ = n.ns.Close()
		n.h, n.ns = nil, netns.None()
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
