package ctl

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/netip"
	"sort"
	"strconv"

	"github.com/calico-aio/calico-aio/ipam"
	"github.com/calico-aio/calico-aio/store"
)

const ipamShowUsage = "Usage:\n  calicoctl ipam show [--ip=<IP> | --show-blocks | --show-borrowed | --show-configuration] [--config=<CONFIG>]"

func runIPAMShow(o IO, args []string) error {
	fs := newFlagSet("ipam show", o)
	var ds datastoreFlags
	ds.register(fs)
	ip := fs.String("ip", "", "report whether this address is in use, and by whom")
	blocks := fs.Bool("show-blocks", false, "show each block under its pool")
	borrowed := fs.Bool("show-borrowed", false, "show addresses held by a node other than their block's")
	config := fs.Bool("show-configuration", false, "show the IPAM configuration")
	if err := fs.Parse(args); err != nil {
		return err
	}
	chosen := 0
	for _, on := range []bool{*ip != "", *blocks, *borrowed, *config} {
		if on {
			chosen++
		}
	}
	if chosen > 1 || fs.NArg() > 0 {
		return usageError(o, ipamShowUsage)
	}
	var addr netip.Addr
	if *ip != "" {
		a, err := netip.ParseAddr(*ip)
		if err != nil {
			return fmt.Errorf("invalid IP address %q", *ip)
		}
		addr = a.Unmap()
	}
	ctx := context.Background()
	c, err := connect(ctx, &ds, o)
	if err != nil {
		return err
	}
	defer c.Close()
	al := ipam.New(c)
	switch {
	case *ip != "":
		err = showIP(ctx, o.Stdout, al, addr)
	case *borrowed:
		err = showBorrowed(ctx, o.Stdout, al)
	case *config:
		err = showConfiguration(ctx, o.Stdout, al)
	default:
		err = showPoolUsage(ctx, o.Stdout, c, al, *blocks)
	}
	if err != nil {
		return datastoreError(c, err)
	}
	return nil
}

// usageCell is "3 (5%)": a count and its share of total, numbers with at
// most five significant digits so that IPv6 sizes read 1.2089e+24.
func usageCell(n, total float64) string {
	return fmt.Sprintf("%.5g (%.0f%%)", n, 100*n/total)
}

// showPoolUsage prints each pool's size and use, with --show-blocks also each
// block of the pool.
func showPoolUsage(ctx context.Context, w io.Writer, c *store.Client, al *ipam.Allocator, withBlocks bool) error {
	pools, err := loadPools(ctx, c)
	if err != nil {
		return err
	}
	blocks, err := loadBlocks(ctx, al)
	if err != nil {
		return err
	}
	t := newBoxTable("GROUPING", "CIDR", "IPS TOTAL", "IPS IN USE", "IPS FREE")
	for _, p := range pools {
		pfx, err := p.Prefix()
		if err != nil {
			continue
		}
		total := math.Ldexp(1, pfx.Addr().BitLen()-pfx.Bits())
		var inUse float64
		var rows [][]string
		for _, b := range blocks {
			if !blockInPool(pfx, b.Prefix) {
				continue
			}
			n := float64(b.Block.InUse())
			inUse += n
			size := math.Ldexp(1, b.Prefix.Addr().BitLen()-b.Prefix.Bits())
			rows = append(rows, []string{"Block", b.Prefix.String(), fmt.Sprintf("%.5g", size), usageCell(n, size), usageCell(size-n, size)})
		}
		t.add("IP Pool", pfx.String(), fmt.Sprintf("%.5g", total), usageCell(inUse, total), usageCell(total-inUse, total))
		if withBlocks {
			for _, r := range rows {
				t.add(r...)
			}
		}
	}
	return t.write(w)
}

// showIP says whether an address is allocated and, if so, to whom.
func showIP(ctx context.Context, w io.Writer, al *ipam.Allocator, addr netip.Addr) error {
	blocks, err := loadBlocks(ctx, al)
	if err != nil {
		return err
	}
	for _, b := range blocks {
		if !b.Prefix.Contains(addr) {
			continue
		}
		for _, a := range b.Allocations() {
			if a.Addr != addr {
				continue
			}
			fmt.Fprintf(w, "IP %s is in use\n", addr)
			if a.Handle != "" {
				fmt.Fprintf(w, "Handle ID: %s\n", a.Handle)
			}
			if len(a.Attrs) > 0 {
				fmt.Fprintln(w, "Active Owner Attributes:")
				keys := make([]string, 0, len(a.Attrs))
				for k := range a.Attrs {
					keys = append(keys, k)
				}
				sort.Strings(keys)
				for _, k := range keys {
					fmt.Fprintf(w, "  %s: %s\n", k, a.Attrs[k])
				}
			}
			return nil
		}
	}
	_, err = fmt.Fprintf(w, "IP %s is not currently assigned\n", addr)
	return err
}

// borrowedRow is one address held by a node other than its block's owner.
type borrowedRow struct {
	addr                        netip.Addr
	node, block, owner, typ, to string
}

// borrowedAllocations lists, in address order, the allocations whose node
// is not the node their block is affine to.
func borrowedAllocations(blocks []ipam.BlockInfo) []borrowedRow {
	var out []borrowedRow
	for _, b := range blocks {
		owner := b.Block.Host()
		for _, a := range b.Allocations() {
			node := a.Attrs[ipam.AttrNode]
			if node == "" || node == owner {
				continue
			}
			out = append(out, borrowedRow{addr: a.Addr, node: node, block: b.Prefix.String(), owner: owner,
				typ: allocationType(a), to: allocatedTo(a)})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].addr.Less(out[j].addr) })
	return out
}

// allocationType is the allocation's "type" attribute, or "pod" for
// Kubernetes pods.
func allocationType(a ipam.Allocation) string {
	if t := a.Attrs[ipam.AttrType]; t != "" {
		return t
	}
	if a.Attrs[ipam.AttrPod] != "" {
		return "pod"
	}
	return ""
}

// allocatedTo names the holder: namespace/pod for pods, else the handle.
func allocatedTo(a ipam.Allocation) string {
	if pod := a.Attrs[ipam.AttrPod]; pod != "" {
		if ns := a.Attrs[ipam.AttrNamespace]; ns != "" {
			return ns + "/" + pod
		}
		return pod
	}
	return a.Handle
}

func showBorrowed(ctx context.Context, w io.Writer, al *ipam.Allocator) error {
	blocks, err := loadBlocks(ctx, al)
	if err != nil {
		return err
	}
	t := newBoxTable("IP", "BORROWING-NODE", "BLOCK", "BLOCK OWNER", "TYPE", "ALLOCATED-TO")
	for _, r := range borrowedAllocations(blocks) {
		t.add(r.addr.String(), r.node, r.block, r.owner, r.typ, r.to)
	}
	return t.write(w)
}

func showConfiguration(ctx context.Context, w io.Writer, al *ipam.Allocator) error {
	cfg, err := al.GetConfig(ctx)
	if err != nil {
		return err
	}
	t := newBoxTable("PROPERTY", "VALUE")
	t.add("StrictAffinity", strconv.FormatBool(cfg.StrictAffinity))
	t.add("AutoAllocateBlocks", strconv.FormatBool(cfg.AutoAllocateBlocks))
	t.add("MaxBlocksPerHost", strconv.Itoa(cfg.MaxBlocksPerHost))
	if cfg.KubeVirtVMAddressPersistence != "" {
		t.add("KubeVirtVMAddressPersistence", cfg.KubeVirtVMAddressPersistence)
	}
	return t.write(w)
}
