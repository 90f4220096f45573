// Package node owns this node's life in the cluster: the default IP pools
// created at start, its Node resource (addresses, autodetection, AS
// number), the files it leaves for the CNI plugin (node name, pod MTU and
// how the MTU is computed) and its tunnel addresses.
package node

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/calico-aio/calico-aio/k8s"
	"github.com/calico-aio/calico-aio/store"
	"github.com/calico-aio/calico-aio/store/api"
)

// Addrs resolves the node's addresses from the --ip and --ip6 flags
// ("autodetect", "none", "" or an address or prefix) with their
// autodetection methods.
func Addrs(ip, method, ip6, method6 string) (v4, v6 netip.Prefix, err error) {
	ifaces, err := systemIfaces()
	if err != nil {
		return v4, v6, err
	}
	resolve := func(val, method string, is6 bool) (netip.Prefix, error) {
		switch val {
		case "none", "":
			return netip.Prefix{}, nil
		case "autodetect":
			return autodetect(method, is6, ifaces)
		}
		if p, err := netip.ParsePrefix(val); err == nil {
			return p, nil
		}
		a, err := netip.ParseAddr(val)
		if err != nil || a.Is6() != is6 {
			return netip.Prefix{}, fmt.Errorf("--ip%s: %q is not an IPv%s address", map[bool]string{true: "6"}[is6], val, map[bool]string{false: "4", true: "6"}[is6])
		}
		for _, i := range ifaces {
			for _, p := range i.addrs {
				if p.Addr() == a {
					return p, nil
				}
			}
		}
		return netip.PrefixFrom(a, a.BitLen()), nil
	}
	if v4, err = resolve(ip, method, false); err != nil {
		return v4, v6, err
	}
	v6, err = resolve(ip6, method6, true)
	return v4, v6, err
}

// Register creates or updates this node's Node resource with its BGP
// addresses and, when k8sRef is set, orchRefs [{nodeName: k8sRef,
// orchestrator: k8s}] as Calico's calico-node writes from
// CALICO_K8S_NODE_REF (other orchRefs are kept). Another node already
// holding the same address is an error.
func Register(ctx context.Context, c *store.Client, name, k8sRef string, v4, v6 netip.Prefix, asn uint32) error {
	k, _ := api.LookupKind("Node")
	objs, _, err := c.ListResources(ctx, k, "")
	if err != nil {
		return fmt.Errorf("listing nodes: %w", err)
	}
	for _, o := range objs {
		n := o.(*api.Node)
		if n.Metadata.Name == name || n.Spec.BGP == nil {
			continue
		}
		for _, mine := range []netip.Prefix{v4, v6} {
			if !mine.IsValid() {
				continue
			}
			for _, theirs := range []string{n.Spec.BGP.IPv4Address, n.Spec.BGP.IPv6Address} {
				if p, err := netip.ParsePrefix(theirs); err == nil && p.Addr() == mine.Addr() {
					return fmt.Errorf("node address %s is already used by node %q: each node needs its own address (set --ip or IP_AUTODETECTION_METHOD)", mine.Addr(), n.Metadata.Name)
				}
			}
		}
	}
	for attempt := 0; attempt < 10; attempt++ {
		r, err := c.GetResource(ctx, k, "", name)
		var n *api.Node
		switch {
		case errors.Is(err, store.ErrNotFound):
			n = k.NewObject().(*api.Node)
			n.Metadata.Name = name
		case err != nil:
			return err
		default:
			n = r.(*api.Node)
		}
		if n.Spec.BGP == nil {
			n.Spec.BGP = &api.NodeBGPSpec{}
		}
		n.Spec.BGP.IPv4Address, n.Spec.BGP.IPv6Address = prefixString(v4), prefixString(v6)
		if asn != 0 {
			a := api.ASNumber(asn)
			n.Spec.BGP.ASNumber = &a
		}
		if *n.Spec.BGP == (api.NodeBGPSpec{}) {
			n.Spec.BGP = nil // no addresses (--ip none): Calico stores no bgp section
		}
		if k8sRef != "" {
			n.Spec.OrchRefs = withK8sRef(n.Spec.OrchRefs, k8sRef)
		}
		if n.Metadata.ResourceVersion == "" {
			_, err = c.CreateResource(ctx, n)
		} else {
			_, err = c.UpdateResource(ctx, n)
		}
		if errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrAlreadyExists) {
			continue
		}
		return err
	}
	return fmt.Errorf("registering node %s: too many conflicts", name)
}

// withK8sRef is refs with its k8s entry naming node: the first k8s entry
// changed in place, or one appended when there is none.
func withK8sRef(refs []api.OrchRef, node string) []api.OrchRef {
	out := slices.Clone(refs)
	for i := range out {
		if out[i].Orchestrator == k8s.OrchestratorK8s {
			out[i].NodeName = node
			return out
		}
	}
	return append(out, api.OrchRef{NodeName: node, Orchestrator: k8s.OrchestratorK8s})
}

func prefixString(p netip.Prefix) string {
	if !p.IsValid() {
		return ""
	}
	return p.String()
}

// WriteFiles leaves the node name and MTU where the CNI plugin reads them.
func WriteFiles(libDir, name string, mtu int) error {
	if err := os.MkdirAll(libDir, 0o755); err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	for file, val := range map[string]string{"nodename": name, "mtu": strconv.Itoa(mtu)} {
		tmp := filepath.Join(libDir, "."+file+".tmp")
		if err := os.WriteFile(tmp, []byte(val), 0o644); err != nil {
			return fmt.Errorf("writing %s: %w", file, err)
		}
		if err := os.Rename(tmp, filepath.Join(libDir, file)); err != nil {
			return err
		}
	}
	return nil
}
