package config

import (
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/calico-aio/calico-aio/store/api"
)

// Parsers and checks for the settings of the routes to local workloads
// and of the workload interfaces (deviceRoute*, interfacePrefix,
// interfaceExclude, routeTableRange(s)), in Calico's formats.

func ParseIPv6(s string) (string, error) {
	a, err := netip.ParseAddr(s)
	if err != nil || !a.Is6() || a.Is4In6() || a.Zone() != "" {
		return "", fmt.Errorf("%q is not an IPv6 address", s)
	}
	return a.String(), nil
}

func ValidIPv6(s string) error { _, err := ParseIPv6(s); return err }

// ifaceList is Felix's interface list (interfacePrefix).
var ifaceList = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-zA-Z0-9_-]{1,15}(,[a-zA-Z0-9_-]{1,15})*$`) })

func ParseIfaceList(s string) (string, error) {
	if !ifaceList().MatchString(s) {
		return "", fmt.Errorf("%q is not a comma-separated list of interface name prefixes", s)
	}
	return s, nil
}

func ValidIfaceList(s string) error { _, err := ParseIfaceList(s); return err }

func ParseIfaceExclude(s string) (string, error) {
	if msg := api.InterfaceExcludeProblem(s); msg != "" {
		return "", errors.New(msg)
	}
	return s, nil
}

func ValidIfaceExclude(s string) error { _, err := ParseIfaceExclude(s); return err }

var tableRange = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^(\d+)-(\d+)$`) })

// ParseRouteTableRange reads routeTableRange "n-m", 1 <= n <= m <= 250.
func ParseRouteTableRange(s string) (*api.RouteTableRange, error) {
	m := tableRange().FindStringSubmatch(s)
	if m == nil {
		return nil, fmt.Errorf("%q must be a range of route table indices within 1-250", s)
	}
	lo, err1 := strconv.Atoi(m[1])
	hi, err2 := strconv.Atoi(m[2])
	r := &api.RouteTableRange{Min: lo, Max: hi}
	if err1 != nil || err2 != nil || ValidRouteTableRange(r) != nil {
		return nil, fmt.Errorf("%q must be a range of route table indices within 1-250", s)
	}
	return r, nil
}

func ValidRouteTableRange(r *api.RouteTableRange) error {
	if r.Min < 1 || r.Max < r.Min || r.Max > 250 {
		return fmt.Errorf("%d-%d must be a range of route table indices within 1-250", r.Min, r.Max)
	}
	return nil
}

var tableRanges = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(\d+)-(\d+)`) })

// ParseRouteTableRanges reads routeTableRanges: "n-m" ranges separated by
// commas or spaces, as Calico's variable.
func ParseRouteTableRanges(s string) (*[]api.RouteTableRange, error) {
	var out []api.RouteTableRange
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' }) {
		m := tableRanges().FindStringSubmatch(f)
		if m == nil || m[0] != f {
			return nil, fmt.Errorf("%q must be a list of route table ranges n-m", s)
		}
		lo, err1 := strconv.ParseInt(m[1], 10, 64)
		hi, err2 := strconv.ParseInt(m[2], 10, 64)
		if err1 != nil || err2 != nil || hi > api.MaxRouteTableIndex {
			return nil, fmt.Errorf("%q: %s: max value is too high", s, f)
		}
		out = append(out, api.RouteTableRange{Min: int(lo), Max: int(hi)})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%q must be a list of route table ranges n-m", s)
	}
	if err := ValidRouteTableRanges(&out); err != nil {
		return nil, err
	}
	return &out, nil
}

func ValidRouteTableRanges(rs *[]api.RouteTableRange) error {
	for _, r := range *rs {
		if msg := r.Problem(); msg != "" {
			return fmt.Errorf("%d-%d: %s", r.Min, r.Max, msg)
		}
	}
	if api.RouteTablesTargeted(*rs) > api.MaxRouteTables {
		return fmt.Errorf("targets too many tables (at most %d)", api.MaxRouteTables)
	}
	return nil
}
