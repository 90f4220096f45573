package ctl

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/calico-aio/calico-aio/ipam"
	"github.com/calico-aio/calico-aio/store"
	"github.com/calico-aio/calico-aio/store/api"
)

// ipAdd gives an attached container one more address.
func (e *workloadEnv) ipAdd(ctx context.Context, arg, ipArg string) (err error) {
	c, ep, err := e.resolveEndpoint(ctx, arg, true)
	if err != nil {
		return err
	}
	handle := handleID(c)
	addrs, err := e.assign(ctx, ipArg, handle)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_, _ = e.al.ReleaseIPs(context.Background(), releaseOpts(addrs, handle))
		}
	}()
	w := e.endpointWorkload(c, ep)
	if err = w.AddAddrs(c.netns, addrs); err != nil {
		return fmt.Errorf("adding %s to %s: %w", joinAddrs(addrs), c.desc, err)
	}
	defer func() {
		if err != nil {
			_ = w.RemoveAddrs(c.netns, addrs)
		}
	}()
	_, err = updateWEP(ctx, e.c, ep.Metadata.Namespace, ep.Metadata.Name, func(w *api.WorkloadEndpoint) error {
		for _, a := range addrs {
			n := netip.PrefixFrom(a, a.BitLen()).String()
			if !slices.Contains(w.Spec.IPNetworks, n) {
				w.Spec.IPNetworks = append(w.Spec.IPNetworks, n)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("updating endpoint %s: %w", ep.Metadata.Name, err)
	}
	fmt.Fprintf(e.o.Stdout, "IP %s added to %s.\n", joinAddrs(addrs), c.desc)
	return nil
}

func releaseOpts(addrs []netip.Addr, handle string) []ipam.ReleaseOptions {
	opts := make([]ipam.ReleaseOptions, len(addrs))
	for i, a := range addrs {
		opts[i] = ipam.ReleaseOptions{Addr: a, Handle: handle}
	}
	return opts
}

// ipRemove takes an address away from an attached container and releases it.
func (e *workloadEnv) ipRemove(ctx context.Context, arg, ipArg string) error {
	c, ep, err := e.resolveEndpoint(ctx, arg, false)
	if err != nil {
		return err
	}
	addr, ok := parseAddrOrCIDR(ipArg)
	if !ok {
		return fmt.Errorf("%q is not an IP address", ipArg)
	}
	net := netip.PrefixFrom(addr, addr.BitLen()).String()
	if !slices.Contains(ep.Spec.IPNetworks, net) {
		return fmt.Errorf("%s is not an address of %s (it has %s)", addr, c.desc, strings.Join(ep.Spec.IPNetworks, ", "))
	}
	_, err = updateWEP(ctx, e.c, ep.Metadata.Namespace, ep.Metadata.Name, func(w *api.WorkloadEndpoint) error {
		w.Spec.IPNetworks = slices.DeleteFunc(w.Spec.IPNetworks, func(n string) bool { return n == net })
		return nil
	})
	if err != nil {
		return fmt.Errorf("updating endpoint %s: %w", ep.Metadata.Name, err)
	}
	if err := e.endpointWorkload(c, ep).RemoveAddrs(c.netns, []netip.Addr{addr}); err != nil {
		return fmt.Errorf("removing %s from %s: %w", addr, c.desc, err)
	}
	if _, err := e.al.ReleaseIPs(ctx, releaseOpts([]netip.Addr{addr}, handleID(c))); err != nil {
		return fmt.Errorf("releasing %s: %w", addr, err)
	}
	fmt.Fprintf(e.o.Stdout, "IP %s removed from %s.\n", addr, c.desc)
	return nil
}

// endpointShow prints the container's endpoints.
func (e *workloadEnv) endpointShow(ctx context.Context, arg string) error {
	c, err := e.resolve(ctx, arg, false)
	if err != nil {
		return err
	}
	eps, err := e.endpointsOf(ctx, c)
	if err != nil {
		return err
	}
	if len(eps) == 0 {
		return fmt.Errorf("%s has no Calico endpoint on node %s", c.desc, e.node)
	}
	states := endpointStates(ctx, e.c)
	t := newBoxTable("Endpoint ID", "Interface", "Host Interface", "Addresses", "MAC", "Profiles", "State")
	for _, w := range eps {
		t.add(w.Metadata.Name, w.Spec.Endpoint, w.Spec.InterfaceName, strings.Join(w.Spec.IPNetworks, ","), w.Spec.MAC,
			strings.Join(w.Spec.Profiles, ","), states.of(w))
	}
	return t.write(e.o.Stdout)
}

// profiles changes the profiles of the container's endpoint. Profiles to
// add must exist; adding one already there, or removing one that is not,
// is reported and changes nothing.
func (e *workloadEnv) profiles(ctx context.Context, arg, op string, names []string) error {
	c, ep, err := e.resolveEndpoint(ctx, arg, false)
	if err != nil {
		return err
	}
	if op != "remove" {
		for _, n := range names {
			if err := profileExists(ctx, e.c, n); err != nil {
				return err
			}
		}
	}
	var notes []string
	changed := false
	final, err := updateWEP(ctx, e.c, ep.Metadata.Namespace, ep.Metadata.Name, func(w *api.WorkloadEndpoint) error {
		notes, changed = nil, false
		cur := w.Spec.Profiles
		switch op {
		case "append":
			for _, n := range names {
				if slices.Contains(cur, n) {
					notes = append(notes, fmt.Sprintf("Profile %s is already in the profiles of %s.", n, c.desc))
					continue
				}
				cur, changed = append(cur, n), true
			}
		case "remove":
			for _, n := range names {
				if !slices.Contains(cur, n) {
					notes = append(notes, fmt.Sprintf("Profile %s is not in the profiles of %s.", n, c.desc))
					continue
				}
				cur, changed = slices.DeleteFunc(cur, func(p string) bool { return p == n }), true
			}
		case "set":
			var set []string
			for _, n := range names {
				if !slices.Contains(set, n) {
					set = append(set, n)
				}
			}
			changed = !slices.Equal(set, cur)
			cur = set
		}
		w.Spec.Profiles = cur
		if !changed {
			return errUnchanged
		}
		return nil
	})
	switch {
	case errors.Is(err, errUnchanged):
		final = ep
	case err != nil:
		return fmt.Errorf("updating endpoint %s: %w", ep.Metadata.Name, err)
	}
	for _, n := range notes {
		fmt.Fprintln(e.o.Stdout, n)
	}
	if len(final.Spec.Profiles) == 0 {
		fmt.Fprintf(e.o.Stdout, "%s has no profiles (its traffic is dropped unless a policy selects it).\n", c.desc)
	} else {
		fmt.Fprintf(e.o.Stdout, "Profiles of %s: %s\n", c.desc, strings.Join(final.Spec.Profiles, ", "))
	}
	return nil
}

// errUnchanged stops updateWEP without writing.
var errUnchanged = errors.New("unchanged")

func profileExists(ctx context.Context, c *store.Client, name string) error {
	_, err := c.GetResource(ctx, profileKind(), "", name)
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("profile %s does not exist: create it with 'calicoctl profile add %s'", name, name)
	}
	return err
}

func profileKind() api.KindInfo {
	k, _ := api.LookupKind("Profile")
	return k
}
