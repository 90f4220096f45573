package dataplane

import (
	"errors"
	"fmt"

	"github.com/vishvananda/netlink"
)

// LinkExists reports whether an interface named name exists (kube-proxy's
// kube-ipvs0 turns on IPVS mode). It asks through the dataplane's netlink
// handle, in the calling thread's namespace.
func (d *Dataplane) LinkExists(name string) (bool, error) {
	if err := d.nl.ready(); err != nil {
		return false, err
	}
	_, err := d.nl.h.LinkByName(name)
	var missing netlink.LinkNotFoundError
	switch {
	case errors.As(err, &missing):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("looking up interface %s: %w", name, err)
	}
	return true, nil
}
