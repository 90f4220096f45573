package ctl

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/calico-aio/calico-aio/build/version"
	"github.com/calico-aio/calico-aio/ipam"
	"github.com/calico-aio/calico-aio/store"
	"github.com/calico-aio/calico-aio/store/api"
)

// ipamReportFormat marks the reports "ipam check -o" writes; "ipam release
// --from-report" reads no other.
const ipamReportFormat = "calico-aio/ipam-check-report/v1"

// ipamReport is the problems "ipam check" found, as written with -o.
type ipamReport struct {
	Format      string `json:"format"`
	Version     string `json:"version"`
	GeneratedAt string `json:"generatedAt"`
	Problems    int    `json:"problems"`
	// LeakedIPs are allocated but used by no workload endpoint or node.
	LeakedIPs []leakedIP `json:"leakedIPs"`
	// UnallocatedIPs are used by a workload endpoint or node but not allocated.
	UnallocatedIPs []unallocatedIP `json:"unallocatedIPs"`
	// HandlesWithoutIPs are handles no allocation refers to.
	HandlesWithoutIPs []orphanHandle `json:"handlesWithoutIPs"`
	// MissingHandles are handles allocations refer to that do not exist.
	MissingHandles []missingHandle `json:"missingHandles"`
	// StaleAffinities tie blocks to nodes that do not exist.
	StaleAffinities []staleAffinity `json:"staleAffinities"`
}

// leakedIP identifies one allocation exactly: releasing it with its handle
// and sequence number cannot free the address if it was released and handed
// out again after the report was written.
type leakedIP struct {
	IP             string            `json:"ip"`
	Handle         string            `json:"handle"`
	SequenceNumber uint64            `json:"sequenceNumber"`
	Node           string            `json:"node"`
	Block          string            `json:"block"`
	Attrs          map[string]string `json:"attrs,omitempty"`
}

type unallocatedIP struct {
	IP     string   `json:"ip"`
	Owners []string `json:"owners"`
	InPool bool     `json:"inPool"`
}

type orphanHandle struct {
	Handle   string         `json:"handle"`
	Revision int64          `json:"revision"`
	Blocks   map[string]int `json:"blocks"`
}

type missingHandle struct {
	Handle string   `json:"handle"`
	IPs    []string `json:"ips"`
}

// staleAffinity is a block tied to a node that does not exist, by an
// affinity record (State set) or only by the block's own affinity field.
type staleAffinity struct {
	Node       string `json:"node"`
	Block      string `json:"block"`
	State      string `json:"state,omitempty"`
	BlockInUse int    `json:"blockInUse"`
}

// ipamState is everything the check compares, read once.
type ipamState struct {
	handles    []ipam.HandleInfo
	affinities []ipam.AffinityInfo
	blocks     []ipam.BlockInfo // in address order
	pools      []netip.Prefix
	ipUsers
}

// ipUsers is what uses addresses: workload endpoints and nodes' tunnels.
type ipUsers struct {
	nodes     map[string]bool
	owners    map[netip.Addr][]string // who uses each address
	wepIPs    int
	tunnelIPs int
}

// stillLeaked reports whether a leaked allocation is still unused: no
// endpoint or node uses its address, and a tunnel address's node is gone.
func (u *ipUsers) stillLeaked(a ipam.Allocation, node string) bool {
	return len(u.owners[a.Addr]) == 0 && !(isTunnelAllocation(a) && u.nodes[node])
}

// loadIPAMState reads IPAM before what uses it, so that an address handed
// out while we read shows up as "in use but not allocated" (reported, never
// acted on) rather than as leaked (which release would free). Likewise
// handles before blocks and affinities before nodes.
func loadIPAMState(ctx context.Context, c *store.Client, al *ipam.Allocator) (*ipamState, error) {
	st := &ipamState{}
	var err error
	if st.handles, err = al.ListHandles(ctx); err != nil {
		return nil, err
	}
	if st.affinities, err = al.ListAffinities(ctx); err != nil {
		return nil, err
	}
	if st.blocks, err = loadBlocks(ctx, al); err != nil {
		return nil, err
	}
	pools, err := loadPools(ctx, c)
	if err != nil {
		return nil, err
	}
	for _, p := range pools {
		if pfx, err := p.Prefix(); err == nil {
			st.pools = append(st.pools, pfx)
		}
	}
	if st.ipUsers, err = loadIPUsers(ctx, c); err != nil {
		return nil, err
	}
	return st, nil
}

// loadIPUsers reads the nodes and workload endpoints and what they use.
func loadIPUsers(ctx context.Context, c *store.Client) (ipUsers, error) {
	st := ipUsers{nodes: map[string]bool{}, owners: map[netip.Addr][]string{}}
	nodeKind, _ := api.LookupKind("Node")
	nodes, _, err := c.ListResources(ctx, nodeKind, "")
	if err != nil {
		return st, err
	}
	for _, r := range nodes {
		n, ok := r.(*api.Node)
		if !ok {
			continue
		}
		st.nodes[n.Metadata.Name] = true
		for _, t := range nodeTunnelAddrs(n) {
			if addr, ok := parseAddrOrCIDR(t[1]); ok {
				st.owners[addr] = append(st.owners[addr], fmt.Sprintf("node %s (%s)", n.Metadata.Name, t[0]))
				st.tunnelIPs++
			}
		}
	}
	wepKind, _ := api.LookupKind("WorkloadEndpoint")
	weps, _, err := c.ListResources(ctx, wepKind, "")
	if err != nil {
		return st, err
	}
	for _, r := range weps {
		w, ok := r.(*api.WorkloadEndpoint)
		if !ok {
			continue
		}
		for _, n := range w.Spec.IPNetworks {
			if addr, ok := parseAddrOrCIDR(n); ok {
				st.owners[addr] = append(st.owners[addr], "workload "+w.Metadata.Namespace+"/"+w.Metadata.Name)
				st.wepIPs++
			}
		}
	}
	return st, nil
}

// nodeTunnelAddrs are the tunnel addresses a node holds from IPAM, as
// kind/address pairs in a fixed order.
func nodeTunnelAddrs(n *api.Node) [][2]string {
	var out [][2]string
	set := func(kind, a string) {
		if a != "" {
			out = append(out, [2]string{kind, a})
		}
	}
	if n.Spec.BGP != nil {
		set("ipipTunnelAddress", n.Spec.BGP.IPv4IPIPTunnelAddr)
	}
	set("vxlanTunnelAddress", n.Spec.IPv4VXLANTunnelAddr)
	set("vxlanV6TunnelAddress", n.Spec.IPv6VXLANTunnelAddr)
	if n.Spec.Wireguard != nil {
		set("wireguardTunnelAddress", n.Spec.Wireguard.InterfaceIPv4Address)
		set("wireguardV6TunnelAddress", n.Spec.Wireguard.InterfaceIPv6Address)
	}
	return out
}

// tunnelHandlePrefixes start the handles of node tunnel addresses, which no
// workload endpoint carries.
var tunnelHandlePrefixes = []string{"ipip-tunnel-addr-", "vxlan-tunnel-addr-", "vxlan-v6-tunnel-addr-",
	"wireguard-tunnel-addr-", "wireguard-v6-tunnel-addr-"}

// isTunnelAllocation reports whether an allocation is a node's tunnel
// address rather than a workload's.
func isTunnelAllocation(a ipam.Allocation) bool {
	if strings.HasSuffix(a.Attrs[ipam.AttrType], "TunnelAddress") {
		return true
	}
	for _, p := range tunnelHandlePrefixes {
		if strings.HasPrefix(a.Handle, p) {
			return true
		}
	}
	return false
}

// checkIPAM compares IPAM with its users, printing progress to w like
// Calico's check does, and returns the problems found.
func checkIPAM(st *ipamState, w io.Writer, showAll, showProblems bool) ipamReport {
	r := ipamReport{Format: ipamReportFormat, Version: version.Version, GeneratedAt: time.Now().UTC().Format(time.RFC3339),
		LeakedIPs: []leakedIP{}, UnallocatedIPs: []unallocatedIP{}, HandlesWithoutIPs: []orphanHandle{},
		MissingHandles: []missingHandle{}, StaleAffinities: []staleAffinity{}}
	fmt.Fprint(w, "Checking IPAM for inconsistencies...\n\nLoading all IPAM blocks...\n")
	fmt.Fprintf(w, "Found %d IPAM blocks.\n", len(st.blocks))
	allocated := map[netip.Addr]bool{}
	handleIPs := map[string][]string{}
	total := 0
	for _, b := range st.blocks {
		for _, a := range b.Allocations() {
			allocated[a.Addr] = true
			handleIPs[a.Handle] = append(handleIPs[a.Handle], a.Addr.String())
			total++
		}
	}
	fmt.Fprintf(w, "IPAM blocks record %d allocations.\n\nLoading all IPAM pools...\n", total)
	for _, p := range st.pools {
		fmt.Fprintf(w, "  %s\n", p)
	}
	fmt.Fprintf(w, "Found %d active IP pools.\n\nLoading all nodes.\n", len(st.pools))
	fmt.Fprintf(w, "Found %d nodes with %d tunnel IPs.\n\nLoading all workload endpoints.\n", len(st.nodes), st.tunnelIPs)
	fmt.Fprintf(w, "Found %d workload IPs.\nWorkloads and nodes are using %d IPs.\n\n", st.wepIPs, len(st.owners))

	fmt.Fprintln(w, "Scanning for IPs that are allocated but not actually in use...")
	for _, b := range st.blocks {
		for _, a := range b.Allocations() {
			node := a.Attrs[ipam.AttrNode]
			if node == "" {
				node = b.Block.Host()
			}
			status := "in use by " + strings.Join(st.owners[a.Addr], ", ")
			switch {
			case len(st.owners[a.Addr]) > 0:
			case !st.stillLeaked(a, node):
				status = "tunnel address of node " + node
			default:
				status = "leaked"
				r.LeakedIPs = append(r.LeakedIPs, leakedIP{IP: a.Addr.String(), Handle: a.Handle, SequenceNumber: a.SequenceNumber,
					Node: node, Block: b.Prefix.String(), Attrs: a.Attrs})
			}
			if showAll || (showProblems && status == "leaked") {
				fmt.Fprintf(w, "  %s %s (handle %q, node %q, block %s)\n", a.Addr, status, a.Handle, node, b.Prefix)
			}
		}
	}
	fmt.Fprintf(w, "Found %d IPs that are allocated in IPAM but not actually in use.\n", len(r.LeakedIPs))

	fmt.Fprintln(w, "Scanning for IPs that are in use by a workload or node but not allocated in IPAM...")
	inUse := make([]netip.Addr, 0, len(st.owners))
	for a := range st.owners {
		inUse = append(inUse, a)
	}
	sort.Slice(inUse, func(i, j int) bool { return inUse[i].Less(inUse[j]) })
	notInPool := 0
	for _, a := range inUse {
		if allocated[a] {
			continue
		}
		u := unallocatedIP{IP: a.String(), Owners: st.owners[a]}
		for _, p := range st.pools {
			u.InPool = u.InPool || p.Contains(a)
		}
		if !u.InPool {
			notInPool++
		}
		if showProblems || showAll {
			fmt.Fprintf(w, "  %s in use by %s but not allocated (in a pool: %v)\n", a, strings.Join(u.Owners, ", "), u.InPool)
		}
		r.UnallocatedIPs = append(r.UnallocatedIPs, u)
	}
	fmt.Fprintf(w, "Found %d in-use IPs that are not in active IP pools.\n", notInPool)
	fmt.Fprintf(w, "Found %d in-use IPs that are in active IP pools but have no corresponding IPAM allocation.\n\n",
		len(r.UnallocatedIPs)-notInPool)

	fmt.Fprintln(w, "Scanning for IPAM handles with no matching IPs...")
	exists := map[string]bool{}
	for _, h := range st.handles {
		exists[h.ID] = true
		if len(handleIPs[h.ID]) == 0 {
			r.HandlesWithoutIPs = append(r.HandlesWithoutIPs, orphanHandle{Handle: h.ID, Revision: revisionNumber(h.Revision), Blocks: h.Handle.Block})
		}
	}
	fmt.Fprintf(w, "Found %d handles with no matching IPs (and %d handles with matching IPs).\n",
		len(r.HandlesWithoutIPs), len(st.handles)-len(r.HandlesWithoutIPs))
	fmt.Fprintln(w, "Scanning for IPs with missing handle...")
	for id, ips := range handleIPs {
		if id != "" && !exists[id] {
			r.MissingHandles = append(r.MissingHandles, missingHandle{Handle: id, IPs: ips})
		}
	}
	sort.Slice(r.MissingHandles, func(i, j int) bool { return r.MissingHandles[i].Handle < r.MissingHandles[j].Handle })
	fmt.Fprintf(w, "Found %d handles mentioned in blocks with no matching handle resource.\n\n", len(r.MissingHandles))

	fmt.Fprintln(w, "Scanning for block affinities of nodes that do not exist...")
	r.StaleAffinities = staleAffinities(st)
	fmt.Fprintf(w, "Found %d block affinities of nodes that do not exist.\n", len(r.StaleAffinities))
	r.Problems = len(r.LeakedIPs) + len(r.UnallocatedIPs) + len(r.HandlesWithoutIPs) + len(r.MissingHandles) + len(r.StaleAffinities)
	return r
}

// staleAffinities lists blocks tied to nodes that do not exist, by affinity
// record or by the block's own affinity, once per node and block.
func staleAffinities(st *ipamState) []staleAffinity {
	type key struct{ node, block string }
	found := map[key]*staleAffinity{}
	inUse := map[string]int{}
	for _, b := range st.blocks {
		inUse[b.Prefix.String()] = b.Block.InUse()
		if h := b.Block.Host(); h != "" && !st.nodes[h] {
			found[key{h, b.Prefix.String()}] = &staleAffinity{Node: h, Block: b.Prefix.String()}
		}
	}
	for _, a := range st.affinities {
		if st.nodes[a.Node] {
			continue
		}
		k := key{a.Node, a.CIDR.String()}
		if found[k] == nil {
			found[k] = &staleAffinity{Node: a.Node, Block: a.CIDR.String()}
		}
		found[k].State = a.State
		if found[k].State == "" {
			found[k].State = "unknown"
		}
	}
	out := make([]staleAffinity, 0, len(found))
	for _, s := range found {
		s.BlockInUse = inUse[s.Block]
		out = append(out, *s)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Node != out[j].Node {
			return out[i].Node < out[j].Node
		}
		return out[i].Block < out[j].Block
	})
	return out
}

func runIPAMCheck(o IO, args []string) error {
	fs := newFlagSet("ipam check", o)
	var ds datastoreFlags
	ds.register(fs)
	output := fs.StringP("output", "o", "", "write a JSON report of the problems to this file")
	showAll := fs.Bool("show-all-ips", false, "print every allocated and in-use address checked")
	showProblems := fs.Bool("show-problem-ips", false, "print the addresses that leaked or are not allocated")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError(o, "Usage:\n  calicoctl ipam check [--config=<CONFIG>] [--show-all-ips] [--show-problem-ips] [-o <FILE>]")
	}
	ctx := context.Background()
	c, err := connect(ctx, &ds, o)
	if err != nil {
		return err
	}
	defer c.Close()
	st, err := loadIPAMState(ctx, c, ipam.New(c))
	if err != nil {
		return datastoreError(c, err)
	}
	r := checkIPAM(st, o.Stdout, *showAll, *showProblems)
	if *output != "" {
		data, err := json.MarshalIndent(r, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(*output, append(data, '\n'), 0o644); err != nil {
			return fmt.Errorf("writing the report: %w", err)
		}
		fmt.Fprintf(o.Stdout, "Report written to %s.\n", *output)
	}
	fmt.Fprintf(o.Stdout, "Check complete; found %d problems.\n", r.Problems)
	return nil
}

// revisionNumber is a revision as the report's number (etcd's mod
// revision; 0 when the datastore's revisions are not numbers).
func revisionNumber(rev store.Revision) int64 {
	n, _ := strconv.ParseInt(string(rev), 10, 64)
	return n
}
