package libnetwork

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"regexp"
	"strings"
	"sync"

	"github.com/calico-aio/calico-aio/cni"
	"github.com/calico-aio/calico-aio/store"
	"github.com/calico-aio/calico-aio/store/api"
)

// How a Docker endpoint appears in the datastore and on the host, as with
// Calico's plugin: WorkloadEndpoint libnetwork/<node>-libnetwork-libnetwork-<endpointID>
// (orchestrator and workload "libnetwork"), host veth "cali"+endpointID[:11]
// as the first choice (cni.HostIface decides and the endpoint records the
// name taken), and the profile named after the Docker network.

var (
	wepKind, _     = api.LookupKind("WorkloadEndpoint")
	profileKind, _ = api.LookupKind("Profile")
	// hostMAC is the MAC of every host veth, as for CNI pods.
	hostMAC = net.HardwareAddr{0xee, 0xee, 0xee, 0xee, 0xee, 0xee}
)

// containerMAC is the MAC the container's interface gets unless the user
// chose one: locally administered, derived from the endpoint ID. (Calico's
// plugin gave containers ee:ee:ee:ee:ee:ee and the host end a random MAC;
// here the host end keeps the MAC every Calico host veth has, so the
// container's must differ: equal MACs would give both ends the same IPv6
// link-local address, the container's IPv6 gateway.)
func containerMAC(endpointID string) net.HardwareAddr {
	sum := sha256.Sum256([]byte(endpointID))
	return append(net.HardwareAddr{0x02}, sum[:5]...)
}

// idRe is what a Docker network or endpoint ID may be: Docker makes
// 64 hex digits. Compiled on first use (the {0,127} repetition costs every
// process of the binary ~0.4 ms at start-up otherwise).
var idRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,127}$`) })

func checkIDs(networkID, endpointID string) error {
	if !idRe().MatchString(networkID) {
		return fmt.Errorf("NetworkID %q is not a Docker network ID", networkID)
	}
	if !idRe().MatchString(endpointID) {
		return fmt.Errorf("EndpointID %q is not a Docker endpoint ID", endpointID)
	}
	return nil
}

func escape(s string) string { return strings.ReplaceAll(s, "-", "--") }

func (d *driver) endpointName(endpointID string) string {
	return escape(d.cfg.Node) + "-" + Orchestrator + "-" + Orchestrator + "-" + escape(endpointID)
}

// preferredHost is the first choice of the host end's name; the name
// taken is decided by cni.HostIface and recorded in the endpoint.
func preferredHost(endpointID string) string {
	return "cali" + endpointID[:min(11, len(endpointID))]
}

// hostIface is the endpoint's request for its host end's name.
func (d *driver) hostIface(ctx context.Context, endpointID string) (cni.HostIface, error) {
	return cni.HostIface{Preferred: preferredHost(endpointID), Self: cni.EndpointKey(Orchestrator, d.endpointName(endpointID)),
		LoadClaims: cni.NodeClaimsSource(ctx, d.store, d.cfg.Node)}, nil
}

// recordHost is the host end's name an endpoint records when it is
// created: the one it already records, else the one cni.HostIface chooses
// now (Join chooses again, and records another if the host changed).
func (d *driver) recordHost(ctx context.Context, endpointID string) (string, error) {
	if w, err := d.endpoint(ctx, endpointID); err == nil && w.Spec.InterfaceName != "" {
		return w.Spec.InterfaceName, nil
	}
	h, err := d.hostIface(ctx, endpointID)
	if err != nil {
		return "", err
	}
	return d.kern.chooseHost(h)
}

func (d *driver) buildEndpoint(endpointID, host string, addrs []netip.Addr, mac net.HardwareAddr, profiles []string) *api.WorkloadEndpoint {
	w := wepKind.NewObject().(*api.WorkloadEndpoint)
	w.Metadata.Namespace, w.Metadata.Name = Orchestrator, d.endpointName(endpointID)
	w.Spec.Orchestrator, w.Spec.Workload = Orchestrator, Orchestrator
	w.Spec.Node = d.cfg.Node
	w.Spec.Endpoint = endpointID
	for _, a := range addrs {
		w.Spec.IPNetworks = append(w.Spec.IPNetworks, netip.PrefixFrom(a, a.BitLen()).String())
	}
	w.Spec.InterfaceName = host
	w.Spec.MAC = mac.String()
	w.Spec.Profiles = profiles
	return w
}

// noEndpointError says a Docker endpoint has no WorkloadEndpoint.
type noEndpointError struct{ endpointID, node string }

func (e *noEndpointError) Error() string {
	return fmt.Sprintf("endpoint %s does not exist on node %s", e.endpointID, e.node)
}

// endpoint reads a Docker endpoint's WorkloadEndpoint.
func (d *driver) endpoint(ctx context.Context, endpointID string) (*api.WorkloadEndpoint, error) {
	r, err := d.store.GetResource(ctx, wepKind, Orchestrator, d.endpointName(endpointID))
	if errors.Is(err, store.ErrNotFound) {
		return nil, &noEndpointError{endpointID: endpointID, node: d.cfg.Node}
	}
	if err != nil {
		return nil, err
	}
	return r.(*api.WorkloadEndpoint), nil
}

// endpointAddrs are the addresses of an endpoint's ipNetworks.
func endpointAddrs(w *api.WorkloadEndpoint) []netip.Addr {
	var out []netip.Addr
	for _, n := range w.Spec.IPNetworks {
		if p, err := netip.ParsePrefix(n); err == nil {
			out = append(out, p.Addr())
		}
	}
	return out
}

// networkName resolves (once per network) the name of a Docker network.
func (d *driver) networkName(ctx context.Context, networkID string) (string, error) {
	d.mu.Lock()
	name, ok := d.names[networkID]
	d.mu.Unlock()
	if ok {
		return name, nil
	}
	name, err := d.cfg.NetworkName(ctx, networkID)
	if err != nil {
		return "", fmt.Errorf("finding the name of Docker network %s, which names its profile: %w", networkID, err)
	}
	d.mu.Lock()
	d.names[networkID] = name
	d.mu.Unlock()
	return name, nil
}

func (d *driver) forgetNetwork(networkID string) {
	d.mu.Lock()
	delete(d.names, networkID)
	d.mu.Unlock()
}

// ensureProfile creates a missing network profile the way Calico does:
// ingress allowed from endpoints carrying the network's label, egress
// allowed, and the label applied to members. An existing profile (maybe
// edited by the operator) is left alone.
func (d *driver) ensureProfile(ctx context.Context, name string) error {
	if _, err := d.store.Get(ctx, store.ResourceKey(profileKind, "", name)); err == nil || !errors.Is(err, store.ErrNotFound) {
		return err
	}
	p := profileKind.NewObject().(*api.Profile)
	p.Metadata.Name = name
	p.Spec.Ingress = []api.Rule{{Action: api.ActionAllow, Source: api.EntityRule{Selector: "has(" + name + ")"}}}
	p.Spec.Egress = []api.Rule{{Action: api.ActionAllow}}
	p.Spec.LabelsToApply = map[string]string{name: ""}
	if _, err := d.store.CreateResource(ctx, p); err != nil && !errors.Is(err, store.ErrAlreadyExists) {
		return fmt.Errorf("creating the profile of Docker network %q: %w", name, err)
	}
	return nil
}
