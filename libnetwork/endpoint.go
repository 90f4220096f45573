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

	"github.com/calico-aio/calico-aio/store"
	"github.com/calico-aio/calico-aio/store/api"
)

// How a Docker endpoint appears in the datastore and on the host, as with
// Calico's plugin: WorkloadEndpoint libnetwork/<node>-libnetwork-libnetwork-<endpointID>
// (orchestrator and workload "libnetwork"), host veth "cali"+endpointID[:11],
// and the profile named after the Docker network.

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

// vethNames are the host end's name and the temporary name of the end
// Docker moves into the container.
func vethNames(endpointID string) (host, temp string) {
	short := endpointID[:min(11, len(endpointID))]
	return "cali" + short, "temp" + short
}

func (d *driver) buildEndpoint(endpointID string, addrs []netip.Addr, mac net.HardwareAddr, profiles []string) *api.WorkloadEndpoint {
	w := wepKind.NewObject().(*api.WorkloadEndpoint)
	w.Metadata.Namespace, w.Metadata.Name = Orchestrator, d.endpointName(endpointID)
	w.Spec.Orchestrator, w.Spec.Workload = Orchestrator, Orchestrator
	w.Spec.Node = d.cfg.Node
	w.Spec.Endpoint = endpointID
	for _, a := range addrs {
		w.Spec.IPNetworks = append(w.Spec.IPNetworks, netip.PrefixFrom(a, a.BitLen()).String())
	}
	w.Spec.InterfaceName, _ = vethNames(endpointID)
	w.Spec.MAC = mac.String()
	w.Spec.Profiles = profiles
	return w
}

// endpoint reads a Docker endpoint's WorkloadEndpoint.
func (d *driver) endpoint(ctx context.Context, endpointID string) (*api.WorkloadEndpoint, error) {
	r, err := d.store.GetResource(ctx, wepKind, Orchestrator, d.endpointName(endpointID))
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("endpoint %s does not exist on node %s", endpointID, d.cfg.Node)
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
