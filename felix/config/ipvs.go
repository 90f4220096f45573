package config

import (
	"fmt"
	"strings"

	"github.com/calico-aio/calico-aio/store/api"
)

// ParseNodePortRanges reads kubeNodePortRanges as Calico's Felix reads
// FELIX_KUBENODEPORTRANGES: ports ("31000") and ranges ("30000:32767")
// separated by commas; a port name is refused.
func ParseNodePortRanges(s string) (*[]api.Port, error) {
	var out []api.Port
	for _, item := range strings.Split(s, ",") {
		p, err := api.ParsePort(strings.TrimSpace(item))
		if err != nil {
			return nil, fmt.Errorf("%q is not a valid port range: %w", item, err)
		}
		if p.PortName != "" {
			return nil, fmt.Errorf("%q has a port name set: node ports are numbers", item)
		}
		out = append(out, p)
	}
	return &out, nil
}

// ValidNodePortRanges checks stored ranges as validation does at write.
func ValidNodePortRanges(ps *[]api.Port) error {
	for i, p := range *ps {
		if p.PortName != "" || p.MinPort == 0 || p.MaxPort < p.MinPort {
			return fmt.Errorf("[%d] %q must be a port or port range min:max (1-65535)", i, p.String())
		}
	}
	return nil
}
