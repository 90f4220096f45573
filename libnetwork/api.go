package libnetwork

// Wire types of Docker's remote network driver and remote IPAM driver
// protocol: HTTP POST to /<Interface>.<Method> with a JSON body, answered
// with a JSON body. Field names are the JSON keys Docker sends and expects
// (moby libnetwork drivers/remote/api and ipams/remote/api). A failed call
// is answered {"Err": "..."}.

// Names Calico uses in the protocol (its libnetwork plugin's values).
const (
	// PoolIDv4 and PoolIDv6 name the dummy pools handed out when a network
	// names no subnet: addresses then come from any Calico IP pool.
	PoolIDv4 = "CalicoPoolIPv4"
	PoolIDv6 = "CalicoPoolIPv6"
	// Address spaces reported by GetDefaultAddressSpaces.
	LocalAddressSpace  = "CalicoLocalAddressSpace"
	GlobalAddressSpace = "CalicoGlobalAddressSpace"
	// Orchestrator is the WorkloadEndpoint orchestrator and workload of
	// every endpoint the driver writes; endpoints live in this namespace.
	Orchestrator = "libnetwork"
	// GatewayOption is RequestAddress's Options key marking a request for
	// the network gateway, with GatewayRequest as its value.
	GatewayOption  = "RequestAddressType"
	GatewayRequest = "com.docker.network.gateway"
	// routeConnected is StaticRoute.RouteType for an on-link route.
	routeConnected = 1
)

// ErrorResponse is the answer to a call that failed.
type ErrorResponse struct {
	Err string
}

// ActivateResponse answers /Plugin.Activate.
type ActivateResponse struct {
	Implements []string
}

// CapabilitiesResponse answers /NetworkDriver.GetCapabilities.
type CapabilitiesResponse struct {
	Scope             string
	ConnectivityScope string `json:",omitempty"`
}

// IPAMData is one address pool of a network as Docker hands it to the
// network driver.
type IPAMData struct {
	AddressSpace string
	Pool         string
	Gateway      string            `json:",omitempty"`
	AuxAddresses map[string]string `json:",omitempty"`
}

// CreateNetworkRequest is /NetworkDriver.CreateNetwork.
type CreateNetworkRequest struct {
	NetworkID string
	Options   map[string]any
	IPv4Data  []IPAMData
	IPv6Data  []IPAMData
}

// NetworkRequest is /NetworkDriver.DeleteNetwork (and the swarm-only
// AllocateNetwork and FreeNetwork).
type NetworkRequest struct {
	NetworkID string
}

// EndpointInterface is an endpoint's addresses (CIDR form) and MAC.
type EndpointInterface struct {
	Address     string `json:",omitempty"`
	AddressIPv6 string `json:",omitempty"`
	MacAddress  string `json:",omitempty"`
}

// CreateEndpointRequest is /NetworkDriver.CreateEndpoint.
type CreateEndpointRequest struct {
	NetworkID  string
	EndpointID string
	Interface  *EndpointInterface
	Options    map[string]any
}

// CreateEndpointResponse carries what the driver chose for the interface:
// a MAC address only when the request had none.
type CreateEndpointResponse struct {
	Interface *EndpointInterface `json:",omitempty"`
}

// EndpointRequest names one endpoint: /NetworkDriver.DeleteEndpoint,
// EndpointOperInfo, Leave, ProgramExternalConnectivity and
// RevokeExternalConnectivity.
type EndpointRequest struct {
	NetworkID  string
	EndpointID string
	Options    map[string]any `json:",omitempty"`
}

// InfoResponse answers /NetworkDriver.EndpointOperInfo.
type InfoResponse struct {
	Value map[string]any
}

// JoinRequest is /NetworkDriver.Join: the endpoint joins a sandbox.
type JoinRequest struct {
	NetworkID  string
	EndpointID string
	SandboxKey string
	Options    map[string]any
}

// InterfaceName tells Docker which host interface to move into the
// sandbox (SrcName) and the prefix of its name there.
type InterfaceName struct {
	SrcName   string
	DstPrefix string
}

// StaticRoute is a route Docker adds in the sandbox; RouteType 1 is an
// on-link (connected) route, 0 a route via NextHop.
type StaticRoute struct {
	Destination string
	RouteType   int
	NextHop     string `json:",omitempty"`
}

// JoinResponse answers /NetworkDriver.Join.
type JoinResponse struct {
	InterfaceName         InterfaceName
	Gateway               string        `json:",omitempty"`
	GatewayIPv6           string        `json:",omitempty"`
	StaticRoutes          []StaticRoute `json:",omitempty"`
	DisableGatewayService bool
}

// DiscoveryNotification is /NetworkDriver.DiscoverNew and DiscoverDelete
// (and the IPAM ones).
type DiscoveryNotification struct {
	DiscoveryType int
	DiscoveryData any
}

// IPAMCapabilitiesResponse answers /IpamDriver.GetCapabilities.
type IPAMCapabilitiesResponse struct {
	RequiresMACAddress bool
}

// AddressSpacesResponse answers /IpamDriver.GetDefaultAddressSpaces.
type AddressSpacesResponse struct {
	LocalDefaultAddressSpace  string
	GlobalDefaultAddressSpace string
}

// RequestPoolRequest is /IpamDriver.RequestPool.
type RequestPoolRequest struct {
	AddressSpace string
	Pool         string
	SubPool      string
	Options      map[string]string
	V6           bool
}

// RequestPoolResponse answers RequestPool. Data's
// "com.docker.network.gateway" keeps Docker from asking for a gateway
// address: Calico networks route through 169.254.1.1 instead.
type RequestPoolResponse struct {
	PoolID string
	Pool   string
	Data   map[string]string
}

// ReleasePoolRequest is /IpamDriver.ReleasePool.
type ReleasePoolRequest struct {
	PoolID string
}

// RequestAddressRequest is /IpamDriver.RequestAddress: Address empty asks
// for any free address of the pool.
type RequestAddressRequest struct {
	PoolID  string
	Address string
	Options map[string]string
}

// RequestAddressResponse carries the address in CIDR form (/32 or /128).
type RequestAddressResponse struct {
	Address string
	Data    map[string]string `json:",omitempty"`
}

// ReleaseAddressRequest is /IpamDriver.ReleaseAddress.
type ReleaseAddressRequest struct {
	PoolID  string
	Address string
}

// Empty is the request of calls without a payload and the answer of calls
// that return nothing: {}.
type Empty struct{}
