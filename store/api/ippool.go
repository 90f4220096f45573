package api

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
)

// IPPool is a range of addresses Calico IPAM hands out in blocks.
type IPPool struct {
	TypeMeta
	Metadata ObjectMeta `json:"metadata"`
	Spec     IPPoolSpec `json:"spec"`
}

// IPPoolSpec is projectcalico.org/v3 IPPool.spec.
type IPPoolSpec struct {
	CIDR              string             `json:"cidr"`
	VXLANMode         VXLANMode          `json:"vxlanMode,omitempty"`
	IPIPMode          IPIPMode           `json:"ipipMode,omitempty"`
	NATOutgoing       bool               `json:"natOutgoing,omitempty"`
	Disabled          bool               `json:"disabled,omitempty"`
	DisableBGPExport  bool               `json:"disableBGPExport,omitempty"`
	BlockSize         int                `json:"blockSize,omitempty"`
	NodeSelector      string             `json:"nodeSelector,omitempty"`
	NamespaceSelector string             `json:"namespaceSelector,omitempty"`
	AllowedUses       []IPPoolAllowedUse `json:"allowedUses,omitempty"`
	AssignmentMode    AssignmentMode     `json:"assignmentMode,omitempty"`
}

// IPIPMode says when traffic to a pool's addresses is IP-in-IP encapsulated.
type IPIPMode string

// VXLANMode says when traffic to a pool's addresses is VXLAN encapsulated.
type VXLANMode string

// IPPoolAllowedUse is what a pool's addresses may be used for.
type IPPoolAllowedUse string

// AssignmentMode says whether IPAM picks from a pool without being asked.
type AssignmentMode string

const (
	IPIPModeNever       IPIPMode = "Never"
	IPIPModeAlways      IPIPMode = "Always"
	IPIPModeCrossSubnet IPIPMode = "CrossSubnet"

	VXLANModeNever       VXLANMode = "Never"
	VXLANModeAlways      VXLANMode = "Always"
	VXLANModeCrossSubnet VXLANMode = "CrossSubnet"

	IPPoolAllowedUseWorkload     IPPoolAllowedUse = "Workload"
	IPPoolAllowedUseTunnel       IPPoolAllowedUse = "Tunnel"
	IPPoolAllowedUseLoadBalancer IPPoolAllowedUse = "LoadBalancer"

	AssignmentModeAutomatic AssignmentMode = "Automatic"
	AssignmentModeManual    AssignmentMode = "Manual"

	// Default block sizes (prefix lengths) for IPv4 and IPv6 pools.
	DefaultBlockSizeV4 = 26
	DefaultBlockSizeV6 = 122
)

var (
	linkLocalV4 = netip.MustParsePrefix("169.254.0.0/16")
	linkLocalV6 = netip.MustParsePrefix("fe80::/10")
)

func init() {
	register(KindInfo{
		Kind: "IPPool", Plural: "ippools",
		Aliases: []string{"ippool", "ipp", "ipps", "pool", "pools"},
		New:     func() Resource { return &IPPool{} },
	})
}

func (p *IPPool) GetObjectMeta() *ObjectMeta { return &p.Metadata }

// Prefix is the pool's CIDR, masked.
func (p *IPPool) Prefix() (netip.Prefix, error) {
	pfx, err := ParseCIDROrIP(p.Spec.CIDR)
	return pfx.Masked(), err
}

// Enabled reports whether the mode encapsulates some traffic.
func (m IPIPMode) Enabled() bool { return m == IPIPModeAlways || m == IPIPModeCrossSubnet }

// Enabled reports whether the mode encapsulates some traffic.
func (m VXLANMode) Enabled() bool { return m == VXLANModeAlways || m == VXLANModeCrossSubnet }

// Default masks the CIDR's host bits and fills in Calico's defaults: block
// size 26 (IPv4) or 122 (IPv6), nodeSelector all(), both encapsulations
// Never, allowedUses [Workload, Tunnel], assignmentMode Automatic.
func (p *IPPool) Default() {
	s := &p.Spec
	if pfx, err := ParseCIDROrIP(s.CIDR); err == nil {
		s.CIDR = pfx.Masked().String()
		if s.BlockSize == 0 {
			s.BlockSize = DefaultBlockSizeV4
			if pfx.Addr().Is6() {
				s.BlockSize = DefaultBlockSizeV6
			}
		}
	}
	if s.NodeSelector == "" {
		s.NodeSelector = "all()"
	}
	if s.IPIPMode == "" {
		s.IPIPMode = IPIPModeNever
	}
	if s.VXLANMode == "" {
		s.VXLANMode = VXLANModeNever
	}
	if len(s.AllowedUses) == 0 {
		s.AllowedUses = []IPPoolAllowedUse{IPPoolAllowedUseWorkload, IPPoolAllowedUseTunnel}
	}
	if s.AssignmentMode == "" {
		s.AssignmentMode = AssignmentModeAutomatic
	}
}

// Validate checks the pool on its own; CheckPoolOverlap checks it against others.
func (p *IPPool) Validate() error {
	var f fieldErrs
	f.unsupported(p)
	f.meta(&p.Metadata, false, subdomainProblem)
	s := &p.Spec
	f.oneOf("spec.ipipMode", string(s.IPIPMode), "Never", "Always", "CrossSubnet")
	f.oneOf("spec.vxlanMode", string(s.VXLANMode), "Never", "Always", "CrossSubnet")
	if s.IPIPMode.Enabled() && s.VXLANMode.Enabled() {
		f.add("spec.vxlanMode", string(s.VXLANMode), "cannot be enabled together with ipipMode "+string(s.IPIPMode))
	}
	f.selector("spec.nodeSelector", s.NodeSelector)
	f.selector("spec.namespaceSelector", s.NamespaceSelector)
	f.oneOf("spec.assignmentMode", string(s.AssignmentMode), "Automatic", "Manual")
	p.validateUses(&f)
	if s.CIDR == "" {
		f.add("spec.cidr", "", "is required")
		return f.join()
	}
	pfx, ok := f.cidr("spec.cidr", s.CIDR, 0, true)
	if !ok {
		return f.join()
	}
	if pfx.Addr().Is4() && pfx.Overlaps(linkLocalV4) {
		f.add("spec.cidr", s.CIDR, "overlaps the IPv4 link-local range 169.254.0.0/16")
	}
	if pfx.Addr().Is6() && pfx.Overlaps(linkLocalV6) {
		f.add("spec.cidr", s.CIDR, "overlaps the IPv6 link-local range fe80::/10")
	}
	if pfx.Addr().Is6() && s.IPIPMode.Enabled() {
		f.add("spec.ipipMode", string(s.IPIPMode), "is not supported on an IPv6 pool")
	}
	bs, lo, hi, fam := s.BlockSize, 20, 32, "IPv4"
	if pfx.Addr().Is6() {
		lo, hi, fam = 116, 128, "IPv6"
	}
	if bs == 0 { // not defaulted yet: judge the default
		bs = DefaultBlockSizeV4
		if pfx.Addr().Is6() {
			bs = DefaultBlockSizeV6
		}
	}
	switch {
	case bs < lo || bs > hi:
		f.add("spec.blockSize", strconv.Itoa(bs), fmt.Sprintf("must be between %d and %d for an %s pool", lo, hi, fam))
	case !s.Disabled && pfx.Bits() > bs:
		f.add("spec.blockSize", strconv.Itoa(bs), fmt.Sprintf("is less than the pool's prefix length %d: a block must fit inside the pool", pfx.Bits()))
	}
	return f.join()
}

func (p *IPPool) validateUses(f *fieldErrs) {
	s := &p.Spec
	lb := false
	for _, u := range s.AllowedUses {
		lb = lb || u == IPPoolAllowedUseLoadBalancer
	}
	for i, u := range s.AllowedUses {
		switch u {
		case IPPoolAllowedUseLoadBalancer:
		case IPPoolAllowedUseWorkload, IPPoolAllowedUseTunnel:
			if lb {
				f.add(idx("spec.allowedUses", i), string(u), "cannot be combined with LoadBalancer")
			}
		default:
			f.add(idx("spec.allowedUses", i), string(u), "must be one of Workload, Tunnel, LoadBalancer")
		}
	}
	if !lb {
		return
	}
	if s.IPIPMode.Enabled() || s.VXLANMode.Enabled() {
		f.add("spec.allowedUses", "", "a LoadBalancer pool cannot use IPIP or VXLAN")
	}
	if s.NodeSelector != "" && s.NodeSelector != "all()" {
		f.add("spec.nodeSelector", s.NodeSelector, "must be all() for a LoadBalancer pool")
	}
}

// PoolsOverlap reports whether two pools' CIDRs share any address. Pools
// whose CIDR does not parse overlap nothing.
func PoolsOverlap(a, b *IPPool) bool {
	pa, err1 := a.Prefix()
	pb, err2 := b.Prefix()
	return err1 == nil && err2 == nil && pa.Overlaps(pb)
}

// CheckPoolOverlap returns an error naming each existing pool that overlaps
// newPool. A pool with newPool's name is the same pool (an update), not an
// overlap.
func CheckPoolOverlap(newPool *IPPool, existing []*IPPool) error {
	var errs []error
	for _, e := range existing {
		if e == nil || e.Metadata.Name == newPool.Metadata.Name || !PoolsOverlap(newPool, e) {
			continue
		}
		errs = append(errs, &FieldError{
			Field: "spec.cidr",
			Value: newPool.Spec.CIDR,
			Msg: fmt.Sprintf("of IPPool %q overlaps IPPool %q (%s)",
				newPool.Metadata.Name, e.Metadata.Name, e.Spec.CIDR),
		})
	}
	return errors.Join(errs...)
}
