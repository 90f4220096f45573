package config

import (
	"time"

	"github.com/calico-aio/calico-aio/store/api"
)

// NetlinkTimeout is the dataplane's netlink socket timeout for the
// effective netlinkTimeout: Calico's 10s when unset; 0, which leaves
// Calico's Felix unable to open its netlink handles (the library refuses
// a timeout under 1µs), is taken as no timeout (dataplane.Desired: negative).
func NetlinkTimeout(cur *api.FelixConfigurationSpec) time.Duration {
	if cur.NetlinkTimeout == nil {
		return 0 // the dataplane's default, 10s
	}
	if cur.NetlinkTimeout.Duration == 0 {
		return -1
	}
	return cur.NetlinkTimeout.Duration
}
