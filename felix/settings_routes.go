package felix

import (
	"fmt"
	"net/netip"
)

// Parsers and checks for the settings of the routes to local workloads
// and of the workload interfaces (deviceRoute*, interfacePrefix,
// interfaceExclude, routeTableRange(s)), in Calico's formats.

func parseIPv6(s string) (string, error) {
	a, err := netip.ParseAddr(s)
	if err != nil || !a.Is6() || a.Is4In6() || a.Zone() != "" {
		return "", fmt.Errorf("%q is not an IPv6 address", s)
	}
	return a.String(), nil
}

func validIPv6(s string) error { _, err := parseIPv6(s); return err }
