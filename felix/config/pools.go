package config

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/calico-aio/calico-aio/store/api"
)

// Default pools, as calico-node creates them on first start
// (docs/BOOTSTRAP.md; felix/node/pools.go creates them): one per address family from the CALICO_IPV4POOL_* and
// CALICO_IPV6POOL_* variables, created only when no pool of that family
// exists, never changing a pool that does.
const (
	defaultPoolNameV4 = "default-ipv4-ippool"
	defaultPoolNameV6 = "default-ipv6-ippool"
	defaultPoolCIDRV4 = "192.168.0.0/16"
)

// poolFamily names one family's variables and defaults.
type poolFamily struct {
	prefix     string // "CALICO_IPV4POOL_"
	name       string
	is6        bool
	defCIDR    string // "" creates no pool unless a CIDR is given
	defNAT     bool
	lo, hi     int // block size range
	defBlock   int
	ipipCapped bool // IPv6: no IPIP variable, mode Never
}

var poolFamilies = [...]poolFamily{
	{prefix: "CALICO_IPV4POOL_", name: defaultPoolNameV4, defCIDR: defaultPoolCIDRV4, defNAT: true, lo: 20, hi: 32, defBlock: api.DefaultBlockSizeV4},
	{prefix: "CALICO_IPV6POOL_", name: defaultPoolNameV6, is6: true, lo: 116, hi: 128, defBlock: api.DefaultBlockSizeV6, ipipCapped: true},
}

// poolVar maps a pool field to the variable that set it, so a value the
// pool validation refuses is reported under the variable's name.
var poolVar = map[string]string{
	"spec.cidr": "CIDR", "spec.blockSize": "BLOCK_SIZE", "spec.ipipMode": "IPIP", "spec.vxlanMode": "VXLAN",
	"spec.natOutgoing": "NAT_OUTGOING", "spec.nodeSelector": "NODE_SELECTOR", "spec.disableBGPExport": "DISABLE_BGP_EXPORT",
}

// ParseDefaultPools reads the pool variables and returns the pools to
// create when their family has none. Every bad value is an error naming its
// variable; so is a value this agent would refuse to store (for now
// _DISABLE_BGP_EXPORT=true: store/api/unsupported.go).
func ParseDefaultPools(getenv func(string) string) ([]*api.IPPool, error) {
	noDefault, err := envBool(getenv, "NO_DEFAULT_POOLS", false)
	if err != nil {
		return nil, err
	}
	if noDefault {
		for _, f := range poolFamilies {
			if v := getenv(f.prefix + "CIDR"); v != "" {
				return nil, fmt.Errorf("NO_DEFAULT_POOLS=true and %sCIDR=%q: set one or the other", f.prefix, v)
			}
		}
		return nil, nil
	}
	var pools []*api.IPPool
	var errs []error
	for _, f := range poolFamilies {
		p, err := f.parse(getenv)
		errs = append(errs, err)
		if p != nil {
			pools = append(pools, p)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return pools, nil
}

// parse builds f's pool, or nil when f creates none.
func (f poolFamily) parse(getenv func(string) string) (*api.IPPool, error) {
	v := func(name string) (string, string) { return f.prefix + name, strings.TrimSpace(getenv(f.prefix + name)) }
	cidrVar, cidr := v("CIDR")
	if cidr == "" {
		cidr = f.defCIDR
	}
	if cidr == "" || cidr == "none" {
		return nil, nil
	}
	var errs []error
	bad := func(name, val, why string) { errs = append(errs, fmt.Errorf("%s=%q: %s", name, val, why)) }
	pfx, err := netip.ParsePrefix(cidr)
	if err != nil || pfx.Addr().Is6() != f.is6 || pfx.Addr().Is4In6() {
		bad(cidrVar, cidr, fmt.Sprintf("is not an IPv%s CIDR", map[bool]string{false: "4", true: "6"}[f.is6]))
		return nil, errors.Join(errs...)
	}
	k, _ := api.LookupKind("IPPool")
	pool := k.NewObject().(*api.IPPool)
	pool.Metadata.Name = f.name
	pool.Spec.CIDR = pfx.Masked().String()

	blockVar, block := v("BLOCK_SIZE")
	pool.Spec.BlockSize = f.defBlock
	if block != "" {
		n, err := strconv.Atoi(block)
		switch {
		case err != nil:
			bad(blockVar, block, "is not a number")
		case n < f.lo || n > f.hi:
			bad(blockVar, block, fmt.Sprintf("must be between %d and %d", f.lo, f.hi))
		default:
			pool.Spec.BlockSize = n
		}
	}
	if pool.Spec.BlockSize < pfx.Bits() {
		bad(blockVar, strconv.Itoa(pool.Spec.BlockSize), fmt.Sprintf("is shorter than %s's prefix length %d: a block must fit in the pool", cidrVar, pfx.Bits()))
	}
	pool.Spec.IPIPMode = api.IPIPModeNever
	if !f.ipipCapped {
		name, val := v("IPIP")
		m, ok := encapMode(val)
		if !ok {
			bad(name, val, "must be Always, CrossSubnet or Never")
		}
		pool.Spec.IPIPMode = api.IPIPMode(m)
	}
	name, val := v("VXLAN")
	m, ok := encapMode(val)
	if !ok {
		bad(name, val, "must be Always, CrossSubnet or Never")
	}
	pool.Spec.VXLANMode = api.VXLANMode(m)
	if pool.Spec.NATOutgoing, err = envBool(getenv, f.prefix+"NAT_OUTGOING", f.defNAT); err != nil {
		errs = append(errs, err)
	}
	if pool.Spec.DisableBGPExport, err = envBool(getenv, f.prefix+"DISABLE_BGP_EXPORT", false); err != nil {
		errs = append(errs, err)
	}
	_, pool.Spec.NodeSelector = v("NODE_SELECTOR")
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	pool.Default()
	if err := pool.Validate(); err != nil {
		return nil, f.blame(err, getenv)
	}
	return pool, nil
}

// blame rewrites the pool validation's field errors under the names of the
// variables that set those fields.
func (f poolFamily) blame(err error, getenv func(string) string) error {
	var out []error
	for _, e := range flatten(err) {
		var fe *api.FieldError
		if errors.As(e, &fe) {
			if suffix, ok := poolVar[fe.Field]; ok {
				name := f.prefix + suffix
				out = append(out, fmt.Errorf("%s=%q: %s %s", name, getenv(name), fe.Field, fe.Msg))
				continue
			}
		}
		out = append(out, fmt.Errorf("default pool %s: %w", f.name, e))
	}
	return errors.Join(out...)
}

func flatten(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, flatten(e)...)
		}
		return out
	}
	return []error{err}
}

// encapMode reads an IPIP or VXLAN mode as calico-node does: empty, off
// and never are Never; always; crosssubnet or cross-subnet; any case.
func encapMode(v string) (string, bool) {
	switch strings.ToLower(v) {
	case "", "off", "never":
		return "Never", true
	case "always":
		return "Always", true
	case "crosssubnet", "cross-subnet":
		return "CrossSubnet", true
	}
	return "", false
}

// envBool reads a boolean variable; empty is def, anything unreadable an
// error naming the variable.
func envBool(getenv func(string) string, name string, def bool) (bool, error) {
	v := strings.TrimSpace(getenv(name))
	if v == "" {
		return def, nil
	}
	b, err := strconv.ParseBool(strings.ToLower(v))
	if err != nil {
		return def, fmt.Errorf("%s=%q: must be true or false", name, v)
	}
	return b, nil
}
