package store

import (
	"encoding/json"
	"fmt"

	"github.com/calico-aio/calico-aio/store/etcdv3"
)

// ServiceEndpoints is the value under ServiceEndpointsKey: the endpoints of
// one Kubernetes Service, one group per EndpointSlice labelled
// kubernetes.io/service-name=<name>, as the Kubernetes controller publishes
// them. Rule services matches use them: a source match the addresses, a
// destination match each address with each port of its slice (an address
// is not paired with another slice's ports).
type ServiceEndpoints struct {
	Namespace string         `json:"namespace"`
	Name      string         `json:"name"`
	Slices    []ServiceSlice `json:"slices"`
}

// ServiceSlice is one EndpointSlice: its endpoints' addresses and its ports.
type ServiceSlice struct {
	Name      string        `json:"name"`
	Addresses []string      `json:"addresses"`
	Ports     []ServicePort `json:"ports,omitempty"`
}

// ServicePort is a port of a slice: protocol TCP, UDP or SCTP.
type ServicePort struct {
	Name     string `json:"name,omitempty"`
	Protocol string `json:"protocol"`
	Port     uint16 `json:"port"`
}

// Encode is the JSON value stored.
func (s *ServiceEndpoints) Encode() ([]byte, error) {
	b, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("encoding endpoints of service %s/%s: %w", s.Namespace, s.Name, err)
	}
	return b, nil
}

// ParseServiceEndpoints decodes a value stored under key; the namespace and
// name come from the key, which is what they are known by.
func ParseServiceEndpoints(key string, value []byte) (*ServiceEndpoints, error) {
	ns, name, ok := etcdv3.ServiceOfKey(key)
	if !ok {
		return nil, fmt.Errorf("%s is not a service endpoints key (%s<namespace>/<name>)", key, etcdv3.ServicePrefix)
	}
	var s ServiceEndpoints
	if err := json.Unmarshal(value, &s); err != nil {
		return nil, fmt.Errorf("decoding %s: %w", key, err)
	}
	s.Namespace, s.Name = ns, name
	return &s, nil
}
