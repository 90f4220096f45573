package dataplane

import (
	"fmt"

	"github.com/vishvananda/netlink"
)

// One link dump per apply. The route manager's read-back needs every
// link's name, the endpoint and shaping managers look up each endpoint's
// interface on a resync and the pruning scans look for workload and ifb
// devices: while the dataplane's apply holds the handle they share one
// dump, taken when the first of them needs it (or has many interfaces to
// look up: linksFor), instead of one dump each and a request per
// endpoint. An interface not in the dump (made after it) is looked up by
// its own request. The VXLAN and tunl0 devices, which their managers
// create and change, are always looked up afresh.

// bulkLookups: a manager with more interfaces than this to look up in one
// apply takes the dump rather than a request each.
const bulkLookups = 4

// linkDump is the apply's dump by name; outside an apply a fresh one.
func (n *nlHandle) linkDump() (map[string]netlink.Link, error) {
	if n.held && n.links != nil {
		return n.links, nil
	}
	links, err := n.h.LinkList()
	if err != nil {
		return nil, fmt.Errorf("listing links: %w", err)
	}
	byName := make(map[string]netlink.Link, len(links))
	for _, l := range links {
		byName[l.Attrs().Name] = l
	}
	if n.held {
		n.links = byName
	}
	return byName, nil
}

// linksFor takes the apply's dump when count interfaces are to be looked
// up and that is more than bulkLookups.
func (n *nlHandle) linksFor(count int) error {
	if !n.held || count <= bulkLookups {
		return nil
	}
	_, err := n.linkDump()
	return err
}

// link is the interface name: from the apply's dump when it has been
// taken, else by its own request, whose answer the rest of the apply
// shares (an ADD's apply looks up the new interface for its neighbours,
// then for its routes' read-back).
func (n *nlHandle) link(name string) (netlink.Link, error) {
	if !n.held {
		return n.h.LinkByName(name)
	}
	if l, ok := n.links[name]; ok {
		return l, nil
	}
	if l, ok := n.looked[name]; ok {
		return l, nil
	}
	l, err := n.h.LinkByName(name)
	if err == nil {
		if n.looked == nil {
			n.looked = map[string]netlink.Link{}
		}
		n.looked[name] = l
	}
	return l, err
}

// ours is a device only this dataplane makes (an ifb): when the apply's
// dump has been taken it answers, absent included (nil, nil), as nothing
// else makes them; else its own request.
func (n *nlHandle) ours(name string) (netlink.Link, error) {
	if n.held && n.links != nil {
		return n.links[name], nil
	}
	return n.h.LinkByName(name)
}

// release ends the apply's hold: the next apply dumps afresh.
func (n *nlHandle) release() { n.held, n.links, n.looked = false, nil, nil }
