package config

import (
	"fmt"

	"github.com/calico-aio/calico-aio/store/api"
)

// Parsers for the policy-rendering settings (felix/rules), in Calico's
// formats.

// ParseIfaceFilter reads iptablesNATOutgoingInterfaceFilter: an interface
// name in iptables -o syntax ("+" a wildcard), as Calico's iface-param.
func ParseIfaceFilter(s string) (string, error) {
	if !api.IfaceFilterRE().MatchString(s) {
		return "", fmt.Errorf("%q is not an interface name or prefix+ (letters, digits, and : . _ + -; at most 15)", s)
	}
	return s, nil
}

func ValidIfaceFilter(s string) error { _, err := ParseIfaceFilter(s); return err }

// ParseLogPrefix reads logPrefix (store/api.LogPrefixProblem says what
// is accepted).
func ParseLogPrefix(s string) (string, error) {
	if msg := api.LogPrefixProblem(s); msg != "" {
		return "", fmt.Errorf("%q %s", s, msg)
	}
	return s, nil
}

func ValidLogPrefix(s string) error { _, err := ParseLogPrefix(s); return err }

// ParseLogRateLimit reads logActionRateLimit: Calico's N/unit.
func ParseLogRateLimit(s string) (string, error) {
	if !api.LogRateLimitRE().MatchString(s) {
		return "", fmt.Errorf("%q must be N/unit: N 1-9999, unit second, minute, hour or day (e.g. 10/second)", s)
	}
	return s, nil
}

func ValidLogRateLimit(s string) error { _, err := ParseLogRateLimit(s); return err }
