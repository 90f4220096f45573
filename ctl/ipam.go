package ctl

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"sort"

	"github.com/calico-aio/calico-aio/ipam"
	"github.com/calico-aio/calico-aio/store"
	"github.com/calico-aio/calico-aio/store/api"
)

// ipamCommands are the subcommands of "calicoctl ipam".
var ipamCommands = map[string]command{
	"show":      {"Show IP usage of pools and blocks, one address, borrowed addresses or the IPAM configuration", runIPAMShow},
	"check":     {"Check IPAM against workload endpoints and nodes; write a report of what leaked", runIPAMCheck},
	"release":   {"Release one address, or the leaked addresses of a check report", runIPAMRelease},
	"configure": {"Change the IPAM configuration (strict affinity, blocks per host)", runIPAMConfigure},
	"split":     {"Split an IP pool into a power of 2 of equal smaller pools", runIPAMSplit},
}

func runIPAM(o IO, args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		w := o.Stdout
		if len(args) == 0 {
			w = o.Stderr
		}
		ipamUsage(w)
		if len(args) == 0 {
			return exitError{code: 1}
		}
		return nil
	}
	cmd, ok := ipamCommands[args[0]]
	if !ok {
		fmt.Fprintf(o.Stderr, "calicoctl ipam: unknown command %q\n", args[0])
		ipamUsage(o.Stderr)
		return exitError{code: 1}
	}
	return cmd.run(o, args[1:])
}

func ipamUsage(w io.Writer) {
	names := make([]string, 0, len(ipamCommands))
	for n := range ipamCommands {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Fprintln(w, "Usage:\n  calicoctl ipam <command> [<args>...]\n\nCommands:")
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, ipamCommands[n].summary)
	}
}

// usageError prints a command's usage to stderr and fails with exit code 1,
// as calicoctl does for options that do not go together.
func usageError(o IO, usage string) error {
	fmt.Fprintln(o.Stderr, usage)
	return exitError{code: 1}
}

// loadPools lists the IP pools in name (etcd key) order.
func loadPools(ctx context.Context, c *store.Client) ([]*api.IPPool, error) {
	k, _ := api.LookupKind("IPPool")
	objs, _, err := c.ListResources(ctx, k, "")
	if err != nil {
		return nil, err
	}
	out := make([]*api.IPPool, 0, len(objs))
	for _, r := range objs {
		if p, ok := r.(*api.IPPool); ok {
			out = append(out, p)
		}
	}
	return out, nil
}

// loadBlocks lists every block in address order (IPv4 first).
func loadBlocks(ctx context.Context, al *ipam.Allocator) ([]ipam.BlockInfo, error) {
	blocks, err := al.ListBlocks(ctx)
	if err != nil {
		return nil, err
	}
	sort.Slice(blocks, func(i, j int) bool { return blocks[i].Prefix.Addr().Less(blocks[j].Prefix.Addr()) })
	return blocks, nil
}

// blockInPool reports whether a block lies inside a pool.
func blockInPool(pool, block netip.Prefix) bool {
	return block.Bits() >= pool.Bits() && pool.Contains(block.Addr())
}

// parseAddrOrCIDR reads "10.0.0.1" or "10.0.0.1/32" as an address.
func parseAddrOrCIDR(s string) (netip.Addr, bool) {
	if a, err := netip.ParseAddr(s); err == nil {
		return a.Unmap(), true
	}
	if p, err := netip.ParsePrefix(s); err == nil {
		return p.Addr().Unmap(), true
	}
	return netip.Addr{}, false
}
