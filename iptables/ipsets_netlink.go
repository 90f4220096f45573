package iptables

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Member-only changes of existing sets (the effDelta groups: a pod's IP
// joining or leaving a few selector sets on every CNI ADD and DEL) go to
// the kernel over netlink, in-process: exec'ing ipset costs about 5 ms of
// CPU per run (issue #25), a netlink request a few microseconds. Creating,
// destroying and swapping sets, and reading them back, stay with the ipset
// binary, whose restore is atomic per line group and well understood.

// memberConn is what the netlink path needs of a netfilter netlink socket;
// *netlink.Handle has it. Tests may stand in a double.
type memberConn interface {
	IpsetAdd(setname string, entry *netlink.IPSetEntry) error
	IpsetDel(setname string, entry *netlink.IPSetEntry) error
	Close()
}

// nlTimeout bounds each netlink request: the kernel answers at once, but
// a socket without a timeout would hang the dataplane loop forever if it
// did not.
const nlTimeout = 10 * time.Second

// openNetlink opens a netfilter netlink socket in the calling thread's
// network namespace: Apply runs with its thread locked in the target
// namespace (ns.Do), like the ipset processes it starts. One socket per
// Apply is cheaper than the package-level functions' one per request.
func openNetlink() (memberConn, error) {
	h, err := netlink.NewHandle(unix.NETLINK_NETFILTER)
	if err != nil {
		return nil, fmt.Errorf("netfilter netlink socket: %w", err)
	}
	if err := h.SetSocketTimeout(nlTimeout); err != nil {
		h.Close()
		return nil, fmt.Errorf("netfilter netlink socket timeout: %w", err)
	}
	return h, nil
}

// ipsetEntry parses member m of a set of setType and family, as the planner
// has it, into a netlink entry. Only the canonical form is accepted (the
// one `ipset save` prints and canonMember returns): anything else, a
// member kept verbatim from a read-back included, is refused so that its
// group goes through `ipset restore`, which parses it as ipset does.
// Replace is set: without NLM_F_EXCL an add of a present member and a del
// of an absent one succeed, as under `ipset -exist`.
func ipsetEntry(setType, family, m string) (*netlink.IPSetEntry, error) {
	if c, err := canonMember(setType, family, m); err != nil || c != m {
		return nil, fmt.Errorf("member %q of a %s %s set: not in canonical form", m, setType, family)
	}
	e := &netlink.IPSetEntry{Replace: true}
	switch setType {
	case SetTypeIP:
		e.IP = net.IP(netip.MustParseAddr(m).AsSlice())
	case SetTypeNet:
		p, err := netip.ParsePrefix(m)
		if err != nil { // canonical bare address: a host prefix
			a := netip.MustParseAddr(m)
			p = netip.PrefixFrom(a, a.BitLen())
		}
		e.IP, e.CIDR = net.IP(p.Addr().AsSlice()), uint8(p.Bits())
	case SetTypeIPPort:
		addr, pp, _ := strings.Cut(m, ",")
		proto, port, _ := strings.Cut(pp, ":")
		n, _ := strconv.ParseUint(port, 10, 16)
		num, ok := ipProto[proto]
		if !ok {
			return nil, fmt.Errorf("member %q: protocol %q has no netlink number here", m, proto)
		}
		p16 := uint16(n)
		e.IP, e.Protocol, e.Port = net.IP(netip.MustParseAddr(addr).AsSlice()), &num, &p16
	default:
		return nil, fmt.Errorf("set type %q: not written over netlink", setType)
	}
	return e, nil
}

// ipProto numbers the protocols canonMember accepts for hash:ip,port.
var ipProto = map[string]uint8{"tcp": unix.IPPROTO_TCP, "udp": unix.IPPROTO_UDP,
	"sctp": unix.IPPROTO_SCTP, "udplite": unix.IPPROTO_UDPLITE}

// nlGroup is an effDelta group with its members parsed for netlink.
type nlGroup struct {
	g          *group
	adds, dels []*netlink.IPSetEntry
}

// splitNetlink takes out of groups the member-only ones whose every member
// parses, for writeNetlink; the rest are left for restore. With no netlink
// writer everything is left.
func (s *IPSets) splitNetlink(groups []group) (nl []nlGroup, rest []group) {
	if s.openNL == nil {
		return nil, groups
	}
	for i := range groups {
		if ng, ok := s.netlinkGroup(&groups[i]); ok {
			nl = append(nl, ng)
		} else {
			rest = append(rest, groups[i])
		}
	}
	return nl, rest
}

func (s *IPSets) netlinkGroup(g *group) (nlGroup, bool) {
	sp := s.desired[g.set]
	if g.effect != effDelta || sp == nil {
		return nlGroup{}, false
	}
	ng := nlGroup{g: g}
	for _, list := range []struct {
		members []string
		out     *[]*netlink.IPSetEntry
	}{{g.adds, &ng.adds}, {g.dels, &ng.dels}} {
		for _, m := range list.members {
			e, err := ipsetEntry(sp.setType, sp.family, m)
			if err != nil {
				return nlGroup{}, false
			}
			*list.out = append(*list.out, e)
		}
	}
	return ng, true
}

// errNoNetlink is wrapped by writeNetlink's error when no socket could be
// opened: nothing was written, and the caller hands the groups to restore.
var errNoNetlink = errors.New("no netfilter netlink socket")

// writeNetlink applies groups over one netlink socket opened in the
// current namespace: each group's adds, then its dels, as the restore
// lines would. A group stops at its first failing request (the set may
// have been destroyed behind our back); the other groups go on. The
// Observer is told of the whole write once, as of one restore.
func (s *IPSets) writeNetlink(groups []nlGroup) error {
	n := 0
	for _, ng := range groups {
		n += len(ng.adds) + len(ng.dels)
	}
	var errs []error
	if conn, err := s.openNL(); err != nil {
		errs = append(errs, fmt.Errorf("ipset member changes: %w: %w", errNoNetlink, err))
	} else {
		for _, ng := range groups {
			if err := writeGroup(conn, ng); err != nil {
				errs = append(errs, err)
			}
		}
		conn.Close()
		s.nlWrites += n
	}
	err := errors.Join(errs...)
	s.observer.tell(Exec{Op: OpNetlink, IPSet: true, Lines: n, Err: err})
	return err
}

func writeGroup(conn memberConn, ng nlGroup) error {
	for i, e := range ng.adds {
		if err := conn.IpsetAdd(ng.g.set, e); err != nil {
			return fmt.Errorf("ipset %s: netlink add %s: %w", ng.g.set, ng.g.adds[i], err)
		}
	}
	for i, e := range ng.dels {
		if err := conn.IpsetDel(ng.g.set, e); err != nil {
			return fmt.Errorf("ipset %s: netlink del %s: %w", ng.g.set, ng.g.dels[i], err)
		}
	}
	return nil
}
