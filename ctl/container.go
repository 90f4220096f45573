package ctl

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"strings"

	"github.com/spf13/pflag"

	"github.com/calico-aio/calico-aio/cni"
	"github.com/calico-aio/calico-aio/ipam"
	"github.com/calico-aio/calico-aio/store"
	"github.com/calico-aio/calico-aio/store/api"
)

// The classic container verbs: attach a container started with
// --net=none (or any network namespace) to Calico, wired exactly as the
// CNI plugin wires a pod (cni.Workload shares that code).

const containerUsage = `Usage:
  calicoctl container add <CONTAINER> <IP> [--interface=<NAME>]
  calicoctl container remove <CONTAINER>
  calicoctl container <CONTAINER> ip (add|remove) <IP> [--interface=<NAME>]
  calicoctl container <CONTAINER> endpoint show
  calicoctl container <CONTAINER> profile (append|remove|set) [<PROFILE>...]

CONTAINER is a network namespace path (/var/run/netns/NAME), a PID (its
network namespace), or a Docker container name or ID (looked up through
the Docker Engine API; it must be running and not use --net=host).
IP is an address, "ipv4" or "ipv6" (assign one automatically), or the CIDR
of an IP pool (assign one from that pool).

A container attached with "container add" has no profile: with no profile
and no policy selecting it, calico-node drops its traffic. Give it one with
"calicoctl container <CONTAINER> profile append <PROFILE>" (see
"calicoctl profile add").

Options:`

// workloadFlags are the flags of the container verbs.
type workloadFlags struct {
	ds       datastoreFlags
	iface    string
	hostname string
	libDir   string
	docker   string
}

func (f *workloadFlags) register(fs *pflag.FlagSet) {
	f.ds.register(fs)
	fs.StringVar(&f.iface, "interface", "", "the Calico interface inside the container (default for add: "+defaultInterface+")")
	fs.StringVar(&f.hostname, "hostname", "", "this node's name (default: NODENAME, else <lib-dir>/nodename, else the hostname)")
	fs.StringVar(&f.libDir, "lib-dir", "", "calico-node's state directory, with the nodename and mtu files (default: CALICO_LIB_DIR, else "+cni.DefaultLibDir+")")
	fs.StringVar(&f.docker, "docker-socket", "", "the Docker Engine API socket (default: DOCKER_HOST=unix://..., else "+DefaultDockerSocket+")")
}

// defaultInterface is the container interface "container add" creates, as
// classic calicoctl named it (a container may keep Docker's eth0).
const defaultInterface = "eth1"

// workloadEnv is what the container verbs work with.
type workloadEnv struct {
	o      IO
	c      *store.Client
	al     *ipam.Allocator
	node   string
	libDir string
	flags  *workloadFlags
}

func newWorkloadEnv(ctx context.Context, o IO, f *workloadFlags) (*workloadEnv, error) {
	e := &workloadEnv{o: o, flags: f, libDir: f.libDir}
	if e.libDir == "" {
		e.libDir = o.Getenv("CALICO_LIB_DIR")
	}
	if e.libDir == "" {
		e.libDir = cni.DefaultLibDir
	}
	e.node = f.hostname
	if e.node == "" {
		e.node = o.Getenv("NODENAME")
	}
	conf := cni.NetConf{Nodename: e.node, LibDir: e.libDir}
	node, err := conf.NodeName()
	if err != nil {
		return nil, fmt.Errorf("cannot tell this node's name: use --hostname or NODENAME")
	}
	e.node = node
	c, err := connectFor("container", &f.ds, o)
	if err != nil {
		return nil, err
	}
	e.c, e.al = c, ipam.New(c)
	return e, nil
}

func (e *workloadEnv) close() { _ = e.c.Close() }

func (e *workloadEnv) mtu() int { return (&cni.NetConf{LibDir: e.libDir}).EffectiveMTU() }

func (e *workloadEnv) resolve(ctx context.Context, arg string, running bool) (container, error) {
	sock := func() (string, error) { return dockerSocket(e.flags.docker, e.o.Getenv) }
	return resolveContainer(ctx, arg, sock, running)
}

// handleID is the IPAM handle of a container's addresses.
func handleID(c container) string { return "calicoctl." + c.workload }

func (e *workloadEnv) workload(c container, ifName string) cni.Workload {
	return cni.Workload{Node: e.node, Orchestrator: c.orchestrator, ID: c.workload, IfName: ifName}
}

// endpointWorkload is the workload of one of the container's endpoints,
// with the host interface the endpoint records.
func (e *workloadEnv) endpointWorkload(c container, ep *api.WorkloadEndpoint) cni.Workload {
	w := e.workload(c, ep.Spec.Endpoint)
	w.HostIface = ep.Spec.InterfaceName
	return w
}

func runContainer(o IO, args []string) error {
	fs := newFlagSet("container", o)
	var f workloadFlags
	f.register(fs)
	fs.Usage = func() {
		fmt.Fprintln(o.Stderr, containerUsage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	rest := fs.Args()
	if len(rest) < 2 {
		fs.Usage()
		return exitError{code: 1}
	}
	ctx := context.Background()
	run := func(do func(e *workloadEnv) error) error {
		e, err := newWorkloadEnv(ctx, o, &f)
		if err != nil {
			return err
		}
		defer e.close()
		if err := do(e); err != nil {
			return datastoreError(e.c, err)
		}
		return nil
	}
	usage := func(u string) error { return fmt.Errorf("usage: calicoctl container %s", u) }
	switch rest[0] {
	case "add":
		if len(rest) != 3 {
			return usage("add <CONTAINER> <IP> [--interface=<NAME>]")
		}
		return run(func(e *workloadEnv) error { return e.add(ctx, rest[1], rest[2]) })
	case "remove":
		if len(rest) != 2 {
			return usage("remove <CONTAINER>")
		}
		return run(func(e *workloadEnv) error { return e.remove(ctx, rest[1]) })
	}
	arg, verb, words := rest[0], rest[1], rest[2:]
	switch {
	case verb == "ip" && len(words) == 2 && words[0] == "add":
		return run(func(e *workloadEnv) error { return e.ipAdd(ctx, arg, words[1]) })
	case verb == "ip" && len(words) == 2 && words[0] == "remove":
		return run(func(e *workloadEnv) error { return e.ipRemove(ctx, arg, words[1]) })
	case verb == "ip":
		return usage("<CONTAINER> ip (add|remove) <IP> [--interface=<NAME>]")
	case verb == "endpoint" && len(words) == 1 && words[0] == "show":
		return run(func(e *workloadEnv) error { return e.endpointShow(ctx, arg) })
	case verb == "endpoint":
		return usage("<CONTAINER> endpoint show")
	case verb == "profile" && len(words) >= 1 && (words[0] == "append" || words[0] == "remove" || words[0] == "set"):
		if words[0] != "set" && len(words) == 1 {
			return usage("<CONTAINER> profile " + words[0] + " <PROFILE>...")
		}
		return run(func(e *workloadEnv) error { return e.profiles(ctx, arg, words[0], words[1:]) })
	case verb == "profile":
		return usage("<CONTAINER> profile (append|remove|set) [<PROFILE>...]")
	}
	fs.Usage()
	return exitError{code: 1}
}

// endpointsOf lists the container's endpoints on this node, by name.
func (e *workloadEnv) endpointsOf(ctx context.Context, c container) ([]*api.WorkloadEndpoint, error) {
	all, _, err := e.c.ListResources(ctx, wepKind(), cni.EndpointNamespace)
	if err != nil {
		return nil, err
	}
	var out []*api.WorkloadEndpoint
	for _, r := range all {
		w := r.(*api.WorkloadEndpoint)
		if w.Spec.Node == e.node && w.Spec.Orchestrator == c.orchestrator && w.Spec.Workload == c.workload {
			out = append(out, w)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Metadata.Name < out[j].Metadata.Name })
	return out, nil
}

// resolveEndpoint resolves a container argument and its one endpoint.
func (e *workloadEnv) resolveEndpoint(ctx context.Context, arg string, running bool) (container, *api.WorkloadEndpoint, error) {
	c, err := e.resolve(ctx, arg, running)
	if err != nil {
		return c, nil, err
	}
	ep, err := e.oneEndpoint(ctx, c)
	return c, ep, err
}

// oneEndpoint is the container's endpoint (on --interface when given).
func (e *workloadEnv) oneEndpoint(ctx context.Context, c container) (*api.WorkloadEndpoint, error) {
	eps, err := e.endpointsOf(ctx, c)
	if err != nil {
		return nil, err
	}
	var match []*api.WorkloadEndpoint
	for _, w := range eps {
		if e.flags.iface == "" || w.Spec.Endpoint == e.flags.iface {
			match = append(match, w)
		}
	}
	switch {
	case len(match) == 1:
		return match[0], nil
	case len(eps) == 0:
		return nil, fmt.Errorf("%s has no Calico endpoint on node %s: add one with 'calicoctl container add %s <IP>'", c.desc, e.node, c.arg)
	case len(match) == 0:
		return nil, fmt.Errorf("%s has no Calico endpoint on interface %s (it has %s)", c.desc, e.flags.iface, endpointIfaces(eps))
	}
	return nil, fmt.Errorf("%s has Calico endpoints on interfaces %s: choose one with --interface", c.desc, endpointIfaces(eps))
}

func endpointIfaces(eps []*api.WorkloadEndpoint) string {
	names := make([]string, len(eps))
	for i, w := range eps {
		names[i] = w.Spec.Endpoint
	}
	return strings.Join(names, ", ")
}

func wepKind() api.KindInfo {
	k, _ := api.LookupKind("WorkloadEndpoint")
	return k
}

// add attaches a running container: addresses, wiring, endpoint. Anything
// done before a failure is undone.
func (e *workloadEnv) add(ctx context.Context, arg, ipArg string) (err error) {
	c, err := e.resolve(ctx, arg, true)
	if err != nil {
		return err
	}
	ifName := e.flags.iface
	if ifName == "" {
		ifName = defaultInterface
	}
	eps, err := e.endpointsOf(ctx, c)
	if err != nil {
		return err
	}
	if len(eps) > 0 {
		return fmt.Errorf("%s already has a Calico endpoint (%s on interface %s, addresses %s): remove it first with 'calicoctl container remove %s'",
			c.desc, eps[0].Metadata.Name, eps[0].Spec.Endpoint, strings.Join(eps[0].Spec.IPNetworks, ","), c.arg)
	}
	handle := handleID(c)
	// Addresses of an earlier attempt that died before writing the endpoint.
	leftover, err := e.al.ReleaseByHandle(ctx, handle)
	if err != nil {
		return fmt.Errorf("releasing addresses left by an earlier attempt (handle %s): %w", handle, err)
	}
	if len(leftover) > 0 {
		fmt.Fprintf(e.o.Stderr, "Released %s, left by an earlier attempt to add %s.\n", joinAddrs(leftover), c.desc)
	}
	addrs, err := e.assign(ctx, ipArg, handle)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_, _ = e.al.ReleaseByHandle(context.Background(), handle)
		}
	}()
	w := e.workload(c, ifName)
	mac, err := w.Attach(c.netns, e.mtu(), addrs, cni.NodeClaimsSource(ctx, e.c, e.node))
	if err != nil {
		return wiringError(c, err)
	}
	defer func() {
		if err != nil {
			_ = w.Detach(c.netns)
		}
	}()
	wep := w.Endpoint(addrs, mac, nil)
	if _, err = e.c.CreateResource(ctx, wep); err != nil {
		return fmt.Errorf("writing WorkloadEndpoint %s: %w", wep.Metadata.Name, err)
	}
	fmt.Fprintf(e.o.Stdout, "IP %s added to %s (interface %s, host interface %s, endpoint %s).\n", joinAddrs(addrs), c.desc, ifName, w.HostIface, wep.Metadata.Name)
	fmt.Fprintf(e.o.Stdout, "It has no profile yet, so its traffic is dropped: 'calicoctl container %s profile append <PROFILE>'.\n", c.arg)
	return nil
}

func wiringError(c container, err error) error {
	var taken *cni.InterfaceTakenError
	var route *cni.RouteTakenError
	if errors.As(err, &taken) || errors.As(err, &route) {
		return fmt.Errorf("cannot attach %s: %w", c.desc, err)
	}
	return fmt.Errorf("wiring %s failed: %w", c.desc, err)
}

// assign hands out the addresses an IP argument asks for: an address, one
// of "ipv4"/"ipv6", or one from the pool with that CIDR.
func (e *workloadEnv) assign(ctx context.Context, ipArg, handle string) ([]netip.Addr, error) {
	switch strings.ToLower(ipArg) {
	case "ipv4", "ipv6":
		req := ipam.AutoAssignArgs{HandleID: handle, Node: e.node}
		if strings.EqualFold(ipArg, "ipv4") {
			req.Num4 = 1
		} else {
			req.Num6 = 1
		}
		got, err := e.al.AutoAssign(ctx, req)
		if err != nil {
			return nil, fmt.Errorf("cannot assign an %s address: %w", ipArg, err)
		}
		return got.Addrs(), nil
	}
	if p, err := netip.ParsePrefix(ipArg); err == nil && p.Bits() < p.Addr().BitLen() {
		return e.assignFromPool(ctx, p.Masked(), handle)
	}
	addr, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimSuffix(ipArg, "/32"), "/128"))
	if err != nil {
		return nil, fmt.Errorf("%q is not an IP address, ipv4, ipv6 or the CIDR of an IP pool", ipArg)
	}
	addr = addr.Unmap()
	if _, err := e.al.AssignIP(ctx, ipam.AssignIPArgs{Addr: addr, HandleID: handle, Node: e.node}); err != nil {
		var notIn *ipam.NotInPoolError
		var inUse *ipam.InUseError
		switch {
		case errors.As(err, &notIn):
			return nil, fmt.Errorf("cannot use %s: it is outside every enabled IP pool (%s)", addr, e.poolList(ctx))
		case errors.As(err, &inUse):
			return nil, fmt.Errorf("cannot use %s: the address is already in use%s", addr, e.holder(ctx, addr, inUse.Handle))
		}
		return nil, fmt.Errorf("assigning %s: %w", addr, err)
	}
	return []netip.Addr{addr}, nil
}

func (e *workloadEnv) assignFromPool(ctx context.Context, cidr netip.Prefix, handle string) ([]netip.Addr, error) {
	pools, err := loadPools(ctx, e.c)
	if err != nil {
		return nil, err
	}
	for _, p := range pools {
		pp, err := p.Prefix()
		if err != nil || pp.Masked() != cidr {
			continue
		}
		req := ipam.AutoAssignArgs{HandleID: handle, Node: e.node}
		if cidr.Addr().Is4() {
			req.Num4, req.IPv4Pools = 1, []string{p.Metadata.Name}
		} else {
			req.Num6, req.IPv6Pools = 1, []string{p.Metadata.Name}
		}
		got, err := e.al.AutoAssign(ctx, req)
		if err != nil {
			return nil, fmt.Errorf("cannot assign an address from pool %s (%s): %w", p.Metadata.Name, cidr, err)
		}
		return got.Addrs(), nil
	}
	return nil, fmt.Errorf("%s is not the CIDR of an IP pool (%s)", cidr, e.poolList(ctx))
}

// poolList names the enabled pools for an error message.
func (e *workloadEnv) poolList(ctx context.Context) string {
	pools, err := loadPools(ctx, e.c)
	if err != nil {
		return "pools unknown: " + err.Error()
	}
	var cidrs []string
	for _, p := range pools {
		if !p.Spec.Disabled {
			cidrs = append(cidrs, p.Spec.CIDR)
		}
	}
	if len(cidrs) == 0 {
		return "there are no enabled IP pools"
	}
	return "pools: " + strings.Join(cidrs, ", ")
}

// holder says who holds an address: the endpoint using it, else its handle.
func (e *workloadEnv) holder(ctx context.Context, addr netip.Addr, handle string) string {
	all, _, err := e.c.ListResources(ctx, wepKind(), "")
	if err == nil {
		for _, r := range all {
			w := r.(*api.WorkloadEndpoint)
			for _, n := range w.Spec.IPNetworks {
				if p, err := netip.ParsePrefix(n); err == nil && p.Addr() == addr {
					return fmt.Sprintf(" by endpoint %s/%s (workload %s on node %s)", w.Metadata.Namespace, w.Metadata.Name, workloadName(w), w.Spec.Node)
				}
			}
		}
	}
	if handle != "" {
		return " (IPAM handle " + handle + ")"
	}
	return ""
}

func joinAddrs(addrs []netip.Addr) string {
	s := make([]string, len(addrs))
	for i, a := range addrs {
		s[i] = a.String()
	}
	return strings.Join(s, ", ")
}

// remove detaches a container: veth and routes, addresses, endpoints. It
// works when the container has stopped or is gone.
func (e *workloadEnv) remove(ctx context.Context, arg string) error {
	c, err := e.resolve(ctx, arg, false)
	if err != nil && c.workload == "" {
		// Docker no longer knows it (or there is no Docker): find the
		// endpoint by the container ID given.
		found, ferr := e.dockerEndpointByID(ctx, arg)
		if ferr != nil || found == nil {
			return err
		}
		c = *found
	} else if err != nil {
		return err
	}
	eps, err := e.endpointsOf(ctx, c)
	if err != nil {
		return err
	}
	var errs []error
	for _, w := range eps {
		if err := e.endpointWorkload(c, w).Detach(c.netns); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("removing the interfaces of %s: %w", c.desc, errors.Join(errs...))
	}
	released, err := e.al.ReleaseByHandle(ctx, handleID(c))
	if err != nil {
		return fmt.Errorf("releasing the addresses of %s: %w", c.desc, err)
	}
	for _, w := range eps {
		if err := deleteWEP(ctx, e.c, w); err != nil {
			return fmt.Errorf("deleting endpoint %s: %w", w.Metadata.Name, err)
		}
	}
	if len(eps) == 0 && len(released) == 0 {
		return fmt.Errorf("%s has no Calico endpoint on node %s", c.desc, e.node)
	}
	msg := fmt.Sprintf("Removed Calico networking from %s", c.desc)
	if len(released) > 0 {
		msg += " (released " + joinAddrs(released) + ")"
	}
	fmt.Fprintln(e.o.Stdout, msg+".")
	return nil
}

// dockerEndpointByID finds this node's Docker endpoint whose container ID
// is id or starts with it (at least 12 characters).
func (e *workloadEnv) dockerEndpointByID(ctx context.Context, id string) (*container, error) {
	if len(id) < 12 {
		return nil, nil
	}
	all, _, err := e.c.ListResources(ctx, wepKind(), cni.EndpointNamespace)
	if err != nil {
		return nil, err
	}
	var found *container
	for _, r := range all {
		w := r.(*api.WorkloadEndpoint)
		if w.Spec.Node != e.node || w.Spec.Orchestrator != cni.OrchestratorDocker || !strings.HasPrefix(w.Spec.Workload, id) {
			continue
		}
		if found != nil && found.workload != w.Spec.Workload {
			return nil, fmt.Errorf("%q matches several containers", id)
		}
		found = &container{arg: id, desc: "Docker container " + shortID(w.Spec.Workload), orchestrator: cni.OrchestratorDocker, workload: w.Spec.Workload}
	}
	return found, nil
}

// deleteWEP deletes an endpoint at the revision read; gone is done.
func deleteWEP(ctx context.Context, c *store.Client, w *api.WorkloadEndpoint) error {
	_, err := c.DeleteObject(ctx, w)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	return err
}

// modify re-reads a resource, applies change and writes it with
// compare-and-swap, retrying when someone else wrote it in between. An
// error from change stops it without writing.
func modify[T api.Resource](ctx context.Context, c *store.Client, k api.KindInfo, ns, name string, change func(T) error) (T, error) {
	for attempt := 0; ; attempt++ {
		var zero T
		r, err := c.GetResource(ctx, k, ns, name)
		if err != nil {
			return zero, err
		}
		obj := r.(T)
		if err := change(obj); err != nil {
			return zero, err
		}
		_, err = c.UpdateResource(ctx, obj)
		if errors.Is(err, store.ErrConflict) && attempt < 5 {
			continue
		}
		if err != nil {
			return zero, err
		}
		return obj, nil
	}
}

func updateWEP(ctx context.Context, c *store.Client, ns, name string, change func(*api.WorkloadEndpoint) error) (*api.WorkloadEndpoint, error) {
	return modify(ctx, c, wepKind(), ns, name, change)
}

// workloadName is what identifies an endpoint's workload to a person.
func workloadName(w *api.WorkloadEndpoint) string {
	switch {
	case w.Spec.Pod != "":
		return w.Metadata.Namespace + "/" + w.Spec.Pod
	case w.Spec.Workload != "":
		return w.Spec.Workload
	}
	return w.Spec.ContainerID
}
