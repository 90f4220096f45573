package libnetwork

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"syscall"

	"github.com/vishvananda/netlink"

	"github.com/calico-aio/calico-aio/cni"

	"github.com/calico-aio/calico-aio/internal/rtproto"
)

// The kernel side. Unlike the CNI plugin, the driver never enters the
// container: it makes the veth pair in the host namespace and Docker
// moves the temporary end into the container, renames it, gives it the
// address and MAC and adds the routes Join names. The host end gets the
// same treatment as a CNI pod's: MAC ee:ee:ee:ee:ee:ee, proxy ARP, no
// address, and a /32 (/128) route per container address with our
// workload route protocol. The temporary end is made with the endpoint's
// MAC, so it is right even before Docker sets it.

// kernel is what the driver does to the host; unit tests use a fake.
type kernel interface {
	// chooseHost tells the host end's name h chooses now, changing nothing.
	chooseHost(h cni.HostIface) (string, error)
	// addVeth makes the pair under the host end's name v.iface chooses
	// (see cni.HostIface) and returns that name.
	addVeth(v vethSpec) (host string, err error)
	// delVeth deletes the veth pair an endpoint records (host end name);
	// a missing one is done, an interface that is not a veth is left.
	delVeth(host string) error
}

type vethSpec struct {
	iface cni.HostIface
	host  string           // set by create
	mac   net.HardwareAddr // of the container end
	mtu   int
	addrs []netip.Addr
}

// tempName is the name of the end Docker moves into the container while
// it is on the host: unique as the host end's name is.
func tempName(host string) string { return "temp" + strings.TrimPrefix(host, "cali") }

func (v vethSpec) has4() bool { return slices.ContainsFunc(v.addrs, netip.Addr.Is4) }
func (v vethSpec) has6() bool { return slices.ContainsFunc(v.addrs, netip.Addr.Is6) }

// netlinkKernel does the work with netlink and /proc/sys, inside do.
type netlinkKernel struct{ do func(func() error) error }

func (k netlinkKernel) chooseHost(h cni.HostIface) (name string, err error) {
	err = k.do(func() error {
		c, err := h.Choose()
		name = c.Name
		return err
	})
	return name, err
}

func (k netlinkKernel) addVeth(v vethSpec) (string, error) {
	err := k.do(v.create)
	return v.host, err
}

func (k netlinkKernel) delVeth(host string) error {
	return k.do(func() error { return cni.RemoveHostIface(host, "", "") })
}

// create chooses the host end's name (v.host), replaces a leftover pair
// of the same endpoint, then builds the pair; on failure it removes what
// it made.
func (v *vethSpec) create() (err error) {
	choice, err := v.iface.Choose()
	if err != nil {
		return err
	}
	v.host = choice.Name
	if err = v.checkRoutes(); err != nil {
		return err
	}
	if err = choice.RemoveLeftover(); err != nil {
		return err
	}
	temp := tempName(v.host)
	veth := &netlink.Veth{
		LinkAttrs: netlink.LinkAttrs{Name: v.host, MTU: v.mtu, HardwareAddr: hostMAC},
		PeerName:  temp, PeerHardwareAddr: v.mac, PeerMTU: uint32(max(v.mtu, 0)),
	}
	if err = netlink.LinkAdd(veth); err != nil {
		return fmt.Errorf("creating veth %s/%s: %w", v.host, temp, err)
	}
	defer func() {
		if err != nil {
			_ = deleteVeth(v.host)
		}
	}()
	host, err := netlink.LinkByName(v.host)
	if err != nil {
		return fmt.Errorf("host veth %s: %w", v.host, err)
	}
	if err = v.sysctls(); err != nil {
		return err
	}
	if err = netlink.LinkSetUp(host); err != nil {
		return fmt.Errorf("setting %s up: %w", v.host, err)
	}
	for _, a := range v.addrs {
		r := &netlink.Route{LinkIndex: host.Attrs().Index, Dst: hostPrefix(a), Scope: netlink.SCOPE_LINK, Protocol: rtproto.Workload}
		if err = netlink.RouteReplace(r); err != nil {
			return fmt.Errorf("adding host route %s dev %s: %w", a, v.host, err)
		}
	}
	return nil
}

func (v vethSpec) sysctls() error { return cni.SetHostVethSysctls(v.host, v.has6()) }

// checkRoutes refuses addresses the host already routes to an interface
// other than this endpoint's (a *cni.RouteTakenError).
func (v *vethSpec) checkRoutes() error { return cni.CheckHostRoutes(v.addrs, v.host) }

func hostPrefix(a netip.Addr) *net.IPNet {
	return &net.IPNet{IP: a.AsSlice(), Mask: net.CIDRMask(a.BitLen(), a.BitLen())}
}

// deleteVeth removes a pair by its host end, and with it the host routes.
func deleteVeth(host string) error {
	l, err := netlink.LinkByName(host)
	if err != nil {
		var nf netlink.LinkNotFoundError
		if errors.As(err, &nf) {
			return nil
		}
		return fmt.Errorf("looking up %s: %w", host, err)
	}
	if err := netlink.LinkDel(l); err != nil && !errors.Is(err, syscall.ENODEV) {
		return fmt.Errorf("deleting %s: %w", host, err)
	}
	return nil
}
