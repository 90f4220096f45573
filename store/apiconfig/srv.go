package apiconfig

import (
	"errors"
	"fmt"
	"net"
	"strconv"
)

// LookupSRV is net.LookupSRV's shape.
type LookupSRV func(service, proto, name string) (string, []*net.SRV, error)

// discoverEtcd finds the etcd endpoints of a domain by its DNS SRV records,
// as Calico (through etcd's client) does: _etcd-client-ssl._tcp.<domain>
// gives https endpoints, _etcd-client._tcp.<domain> http ones; either may
// be missing, not both.
func discoverEtcd(lookup LookupSRV, domain value) ([]string, error) {
	if lookup == nil {
		return nil, fmt.Errorf("%s: no DNS resolver to discover etcd with", domain.src)
	}
	var eps []string
	var errs []error
	for _, s := range []struct{ service, scheme string }{{"etcd-client-ssl", "https"}, {"etcd-client", "http"}} {
		_, addrs, err := lookup(s.service, "tcp", domain.text)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, a := range addrs {
			eps = append(eps, s.scheme+"://"+net.JoinHostPort(a.Target, strconv.Itoa(int(a.Port))))
		}
	}
	if len(errs) == 2 {
		return nil, fmt.Errorf("%s=%q: no etcd found by DNS SRV records: %w", domain.src, domain.text, errors.Join(errs...))
	}
	if len(eps) == 0 {
		return nil, fmt.Errorf("%s=%q: the DNS SRV records name no etcd", domain.src, domain.text)
	}
	return eps, nil
}
