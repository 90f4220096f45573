package calc

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/calico-aio/calico-aio/felix/rules"
	"github.com/calico-aio/calico-aio/store/etcdv3"
)

// Rule services matches: the Kubernetes controller publishes each
// Service's endpoints (store.ServiceEndpoints); a rule's source.services
// becomes an IP set of the addresses, its destination.services one of
// address,protocol:port entries (each address with each port of its
// slice). A service with nothing published has empty sets: it matches
// nothing.

// applyService records a service's endpoints; the sets of the service are
// re-evaluated from its key alone.
func (s *State) applyService(u Update) {
	if u.Deleted || u.Service == nil {
		delete(s.services, u.Key)
	} else {
		s.services[u.Key] = u.Service
	}
	s.dirtySources[u.Key] = true
}

// isServiceSet says whether a set's members come from a service.
func isServiceSet(k rules.IPSetKind) bool {
	return k == rules.IPSetService || k == rules.IPSetServicePorts
}

// serviceSourceKey is the datastore key a service set's members come from.
func serviceSourceKey(spec rules.IPSetSpec) string { return etcdv3.ServicePrefix + spec.Service }

// evalService returns the entries a service's endpoints contribute to st
// (whose source key is key).
func (s *State) evalService(st *ipsetState, key string) []string {
	if key != serviceSourceKey(st.spec) {
		return nil
	}
	se := s.services[key]
	if se == nil {
		return nil
	}
	var out []string
	for _, sl := range se.Slices {
		for _, a := range sl.Addresses {
			ip, err := netip.ParseAddr(a)
			if err != nil || !st.want(ip) {
				continue
			}
			if st.spec.Kind == rules.IPSetService {
				out = append(out, netip.PrefixFrom(ip, ip.BitLen()).String())
				continue
			}
			for _, p := range sl.Ports {
				out = append(out, fmt.Sprintf("%s,%s:%d", ip, strings.ToLower(p.Protocol), p.Port))
			}
		}
	}
	return out
}
