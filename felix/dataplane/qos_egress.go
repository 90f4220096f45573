package dataplane

import (
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Egress bandwidth (traffic from a workload) is shaped, as in Calico, by a
// tbf on an ifb device named bwcali<hash of the interface>: an ingress
// qdisc on the host veth carries our classifier (qos_bpf.go), which
// redirects every packet the workload sends to the ifb; after the tbf the
// ifb hands it back to the veth's receive path.

const (
	ifbPrefix = "bwcali"
	// qosFilterPrio and qosFilterHandle mark our classifier among the host
	// veth's ingress filters.
	qosFilterPrio   = 0xca1
	qosFilterHandle = 0xca11
	qosFilterName   = "calico-qos-egress"
)

// IfbName is the ifb device that shapes the egress of workload interface
// iface: 15 characters, the kernel's limit.
func IfbName(iface string) string {
	h := sha1.Sum([]byte(iface))
	return ifbPrefix + hex.EncodeToString(h[:])[:15-len(ifbPrefix)]
}

// shapeEgress makes link's egress shaping be tb: the ifb with our tbf, the
// ingress qdisc on link, and our classifier redirecting to the ifb.
func (m *qosManager) shapeEgress(link netlink.Link, tb TokenBucket) error {
	name := link.Attrs().Name
	ifb, err := m.ensureIfb(IfbName(name), link.Attrs().MTU)
	if err != nil {
		return err
	}
	if err := m.reconcile(ifb, tbfFor(tb, ifb)); err != nil {
		return err
	}
	if err := m.ensureIngressQdisc(link); err != nil {
		return err
	}
	ours, err := m.ourFilter(link)
	if err != nil {
		return err
	}
	if ours != nil && m.fed[name] == ifb.Attrs().Index {
		return nil
	}
	fd, err := loadRedirect(ifb.Attrs().Index)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	f := &netlink.BpfFilter{FilterAttrs: netlink.FilterAttrs{LinkIndex: link.Attrs().Index, Parent: netlink.HANDLE_MIN_INGRESS,
		Handle: qosFilterHandle, Priority: qosFilterPrio, Protocol: unix.ETH_P_ALL}, Fd: fd, Name: qosFilterName, DirectAction: true}
	if err := m.nl.h.FilterReplace(f); err != nil {
		return fmt.Errorf("egress redirect on %s: %w", name, err)
	}
	m.fed[name] = ifb.Attrs().Index
	return nil
}

// unshapeEgress removes our classifier from link (nil: it went) and the
// interface's ifb.
func (m *qosManager) unshapeEgress(name string, link netlink.Link) error {
	delete(m.fed, name)
	if link != nil {
		ours, err := m.ourFilter(link)
		if err != nil {
			return err
		}
		if ours != nil {
			if err := m.nl.h.FilterDel(ours); err != nil && !errors.Is(err, syscall.ENOENT) {
				return fmt.Errorf("removing the egress redirect of %s: %w", name, err)
			}
			if err := m.dropEmptyIngressQdisc(link); err != nil {
				return err
			}
		}
	}
	return m.deleteIfb(IfbName(name))
}

// dropEmptyIngressQdisc deletes link's ingress qdisc (the one
// ensureIngressQdisc adds; never a clsact) once no filter is left on it.
func (m *qosManager) dropEmptyIngressQdisc(link netlink.Link) error {
	fs, err := m.nl.h.FilterList(link, netlink.HANDLE_MIN_INGRESS)
	if err != nil || len(fs) > 0 {
		return nil
	}
	qs, err := m.nl.h.QdiscList(link)
	if err != nil {
		return fmt.Errorf("qdiscs of %s: %w", link.Attrs().Name, err)
	}
	for _, q := range qs {
		if in, ok := q.(*netlink.Ingress); ok {
			if err := m.nl.h.QdiscDel(in); err != nil && !errors.Is(err, syscall.ENOENT) && !errors.Is(err, syscall.EINVAL) {
				return fmt.Errorf("removing the ingress qdisc of %s: %w", link.Attrs().Name, err)
			}
		}
	}
	return nil
}

func (m *qosManager) ensureIfb(name string, mtu int) (netlink.Link, error) {
	if l, err := m.nl.h.LinkByName(name); err == nil {
		if l.Attrs().Flags&net.FlagUp == 0 {
			if err := m.nl.h.LinkSetUp(l); err != nil {
				return nil, fmt.Errorf("setting %s up: %w", name, err)
			}
		}
		return l, nil
	}
	la := netlink.NewLinkAttrs()
	la.Name, la.MTU, la.Flags = name, mtu, net.FlagUp
	if err := m.nl.h.LinkAdd(&netlink.Ifb{LinkAttrs: la}); err != nil && !errors.Is(err, syscall.EEXIST) {
		return nil, fmt.Errorf("adding ifb %s: %w", name, err)
	}
	l, err := m.nl.h.LinkByName(name)
	if err != nil {
		return nil, fmt.Errorf("ifb %s: %w", name, err)
	}
	return l, m.nl.h.LinkSetUp(l)
}

func (m *qosManager) deleteIfb(name string) error {
	l, err := m.nl.ours(name)
	if err != nil || l == nil {
		return nil // not there
	}
	if err := m.nl.h.LinkDel(l); err != nil && !errors.Is(err, syscall.ENODEV) {
		return fmt.Errorf("removing ifb %s: %w", name, err)
	}
	return nil
}

// ensureIngressQdisc adds the ingress qdisc our classifier hangs on, unless
// link has it (or clsact, which serves too).
func (m *qosManager) ensureIngressQdisc(link netlink.Link) error {
	qs, err := m.nl.h.QdiscList(link)
	if err != nil {
		return fmt.Errorf("qdiscs of %s: %w", link.Attrs().Name, err)
	}
	for _, q := range qs {
		if q.Attrs().Parent == netlink.HANDLE_INGRESS || q.Attrs().Parent == netlink.HANDLE_CLSACT {
			return nil
		}
	}
	q := &netlink.Ingress{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: link.Attrs().Index, Handle: netlink.MakeHandle(0xffff, 0), Parent: netlink.HANDLE_INGRESS}}
	if err := m.nl.h.QdiscAdd(q); err != nil && !errors.Is(err, syscall.EEXIST) {
		return fmt.Errorf("ingress qdisc on %s: %w", link.Attrs().Name, err)
	}
	return nil
}

// ourFilter is our classifier on link's ingress, or nil. When this apply
// listed the node's qdiscs, a link without an ingress (or clsact) qdisc
// has no filter to list.
func (m *qosManager) ourFilter(link netlink.Link) (netlink.Filter, error) {
	if m.qdiscs != nil && !hasIngress(m.qdiscs[link.Attrs().Index]) {
		return nil, nil
	}
	fs, err := m.nl.h.FilterList(link, netlink.HANDLE_MIN_INGRESS)
	if err != nil {
		if errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.ENOENT) {
			return nil, nil // no ingress qdisc
		}
		return nil, fmt.Errorf("ingress filters of %s: %w", link.Attrs().Name, err)
	}
	for _, f := range fs {
		if bf, ok := f.(*netlink.BpfFilter); ok && f.Attrs().Priority == qosFilterPrio && f.Attrs().Handle == qosFilterHandle {
			return bf, nil
		}
	}
	return nil, nil
}

// pruneIfbs deletes our ifb devices that no desired interface uses.
func (m *qosManager) pruneIfbs() error {
	keep := map[string]bool{}
	for name, sh := range m.desired {
		if sh.out != nil {
			keep[IfbName(name)] = true
		}
	}
	links, err := m.nl.linkDump()
	if err != nil {
		return err
	}
	var errs []error
	for n, l := range links {
		if l.Type() == "ifb" && strings.HasPrefix(n, ifbPrefix) && !keep[n] {
			errs = append(errs, m.deleteIfb(n))
		}
	}
	return errors.Join(errs...)
}

// hasIngress: qs holds an ingress or clsact qdisc (both sit at the
// ingress handle).
func hasIngress(qs []netlink.Qdisc) bool {
	for _, q := range qs {
		if q.Attrs().Parent == netlink.HANDLE_INGRESS {
			return true
		}
	}
	return false
}
