package felix

import (
	"errors"
	"fmt"
	"net/netip"
	"regexp"

	"github.com/calico-aio/calico-aio/store/api"
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

// ifaceList is Felix's interface list (interfacePrefix).
var ifaceList = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,15}(,[a-zA-Z0-9_-]{1,15})*$`)

func parseIfaceList(s string) (string, error) {
	if !ifaceList.MatchString(s) {
		return "", fmt.Errorf("%q is not a comma-separated list of interface name prefixes", s)
	}
	return s, nil
}

func validIfaceList(s string) error { _, err := parseIfaceList(s); return err }

func parseIfaceExclude(s string) (string, error) {
	if msg := api.InterfaceExcludeProblem(s); msg != "" {
		return "", errors.New(msg)
	}
	return s, nil
}

func validIfaceExclude(s string) error { _, err := parseIfaceExclude(s); return err }
