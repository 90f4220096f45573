package k8s

import (
	"cmp"
	"net/netip"
	"slices"
	"strings"

	"github.com/calico-aio/calico-aio/store"
)

// Services' endpoints for rule services matches, as Calico: membership
// comes from a Service's EndpointSlices alone (those labelled
// kubernetes.io/service-name), whatever the endpoints' conditions, and a
// port without a number adds nothing. The etcd-mode controller publishes
// them (k8s/controller/services.go); on the Kubernetes datastore the agent
// reads the slices itself (felix/syncer).

// ServiceEndpoints groups slices by their Service, keyed by
// "<namespace>/<name>", in a deterministic form: slices by name,
// addresses canonical and sorted, ports sorted. FQDN slices and addresses
// that are not IP addresses are left out.
func ServiceEndpoints(in []EndpointSlice) map[string]*store.ServiceEndpoints {
	out := map[string]*store.ServiceEndpoints{}
	for _, es := range in {
		svc := es.Metadata.Labels[LabelServiceName]
		if svc == "" || es.AddressType == "FQDN" {
			continue
		}
		key := es.Metadata.Namespace + "/" + svc
		se := out[key]
		if se == nil {
			se = &store.ServiceEndpoints{Namespace: es.Metadata.Namespace, Name: svc, Slices: []store.ServiceSlice{}}
			out[key] = se
		}
		sl := store.ServiceSlice{Name: es.Metadata.Name, Addresses: []string{}}
		for _, ep := range es.Endpoints {
			for _, a := range ep.Addresses {
				if ip, err := netip.ParseAddr(strings.TrimSpace(a)); err == nil && !ip.Is4In6() {
					sl.Addresses = append(sl.Addresses, ip.String())
				}
			}
		}
		slices.Sort(sl.Addresses)
		sl.Addresses = slices.Compact(sl.Addresses)
		for _, p := range es.Ports {
			if sp, ok := servicePort(p); ok {
				sl.Ports = append(sl.Ports, sp)
			}
		}
		slices.SortFunc(sl.Ports, func(a, b store.ServicePort) int {
			return cmp.Or(cmp.Compare(a.Protocol, b.Protocol), cmp.Compare(a.Port, b.Port), cmp.Compare(a.Name, b.Name))
		})
		sl.Ports = slices.Compact(sl.Ports)
		se.Slices = append(se.Slices, sl)
	}
	for _, se := range out {
		slices.SortFunc(se.Slices, func(a, b store.ServiceSlice) int { return cmp.Compare(a.Name, b.Name) })
	}
	return out
}

// servicePort is a slice port with a number (protocol TCP when unset); ok
// is false for one without a number or with another protocol.
func servicePort(p EndpointPort) (store.ServicePort, bool) {
	if p.Port == nil || *p.Port < 1 || *p.Port > 65535 {
		return store.ServicePort{}, false
	}
	proto := "TCP"
	if p.Protocol != nil {
		proto = strings.ToUpper(*p.Protocol)
	}
	switch proto {
	case "TCP", "UDP", "SCTP":
	default:
		return store.ServicePort{}, false
	}
	sp := store.ServicePort{Protocol: proto, Port: uint16(*p.Port)}
	if p.Name != nil {
		sp.Name = *p.Name
	}
	return sp, true
}
