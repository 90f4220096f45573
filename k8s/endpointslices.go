package k8s

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

var endpointSlicesResource = schema.GroupVersionResource{Group: "discovery.k8s.io", Version: "v1", Resource: "endpointslices"}

// LabelServiceName is the label that names the Service an EndpointSlice
// belongs to.
const LabelServiceName = "kubernetes.io/service-name"

// EndpointSlice is a discovery.k8s.io/v1 EndpointSlice, reduced to
// addresses and ports.
type EndpointSlice struct {
	TypeMeta
	Metadata    ObjectMeta     `json:"metadata"`
	AddressType string         `json:"addressType"` // IPv4, IPv6 or FQDN
	Endpoints   []Endpoint     `json:"endpoints"`
	Ports       []EndpointPort `json:"ports,omitempty"`
}

// Endpoint is one endpoint of a slice: its addresses (one in practice).
type Endpoint struct {
	Addresses []string `json:"addresses"`
}

// EndpointPort is a port of every endpoint of a slice. A nil Port means
// "all ports" in Kubernetes; a nil Protocol means TCP.
type EndpointPort struct {
	Name     *string `json:"name,omitempty"`
	Protocol *string `json:"protocol,omitempty"`
	Port     *int32  `json:"port,omitempty"`
}

// ListEndpointSlices lists the EndpointSlices of every namespace.
func (c *Client) ListEndpointSlices(ctx context.Context) ([]EndpointSlice, error) {
	var out []EndpointSlice
	return out, c.list(ctx, endpointSlicesResource, "endpoint slices", &out)
}
