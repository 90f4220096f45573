package ctl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"strconv"

	"github.com/calico-aio/calico-aio/ipam"
	"github.com/calico-aio/calico-aio/store"
	"github.com/calico-aio/calico-aio/store/api"
)

const ipamReleaseUsage = "Usage:\n  calicoctl ipam release (--ip=<IP> | --from-report=<REPORT>) [--config=<CONFIG>]"

// releaseBatch bounds the addresses freed per transaction; each address
// adds at most one block and one handle to it, well under etcd's limit of
// 128 operations per transaction.
const releaseBatch = 50

func runIPAMRelease(o IO, args []string) error {
	fs := newFlagSet("ipam release", o)
	var ds datastoreFlags
	ds.register(fs)
	ip := fs.String("ip", "", "address to release")
	report := fs.String("from-report", "", "release what an \"ipam check -o\" report found leaked (\"-\" for stdin)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if (*ip == "") == (*report == "") || fs.NArg() > 0 {
		return usageError(o, ipamReleaseUsage)
	}
	var addr netip.Addr
	var rep ipamReport
	if *ip != "" {
		a, err := netip.ParseAddr(*ip)
		if err != nil {
			return fmt.Errorf("invalid IP address %q", *ip)
		}
		addr = a.Unmap()
	} else {
		data, err := readInput(*report, o.Stdin)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(data, &rep); err != nil {
			return fmt.Errorf("report %s: %w", *report, err)
		}
		if rep.Format != ipamReportFormat {
			return fmt.Errorf("report %s: format %q, want %q (written by \"calicoctl ipam check -o\")", *report, rep.Format, ipamReportFormat)
		}
	}
	ctx := context.Background()
	c, err := connect(ctx, &ds, o)
	if err != nil {
		return err
	}
	defer c.Close()
	al := ipam.New(c)
	if *ip != "" {
		unallocated, err := al.ReleaseIPs(ctx, []ipam.ReleaseOptions{{Addr: addr}})
		if err != nil {
			return datastoreError(c, err)
		}
		if len(unallocated) > 0 {
			return fmt.Errorf("IP address %s is not assigned", addr)
		}
		fmt.Fprintf(o.Stdout, "Successfully released IP address %s\n", addr)
		return nil
	}
	if err := releaseFromReport(ctx, o, c, al, &rep); err != nil {
		return datastoreError(c, err)
	}
	return nil
}

// releaseFromReport frees what a check report found: the leaked addresses
// (each only if it is still the very allocation the report saw and nothing
// uses it now), handles that still hold nothing and are unchanged since the
// report, and the block affinities of nodes that still do not exist.
// Problems of other kinds need a person to look at them and are left alone.
func releaseFromReport(ctx context.Context, o IO, c *store.Client, al *ipam.Allocator, rep *ipamReport) error {
	// An address allocated just before its endpoint was written looks leaked
	// to a check that ran in between; by now the endpoint is there.
	users, err := loadIPUsers(ctx, c)
	if err != nil {
		return err
	}
	var leaked []ipam.ReleaseOptions
	inUse := 0
	for _, l := range rep.LeakedIPs {
		a, err := netip.ParseAddr(l.IP)
		if err != nil {
			return fmt.Errorf("report: leaked IP %q: %w", l.IP, err)
		}
		if !users.stillLeaked(ipam.Allocation{Addr: a.Unmap(), Handle: l.Handle, Attrs: l.Attrs}, l.Node) {
			inUse++
			continue
		}
		seq := l.SequenceNumber
		leaked = append(leaked, ipam.ReleaseOptions{Addr: a.Unmap(), Handle: l.Handle, SequenceNumber: &seq})
	}
	released, skipped := 0, 0
	for start := 0; start < len(leaked); start += releaseBatch {
		opts := leaked[start:min(start+releaseBatch, len(leaked))]
		unallocated, err := al.ReleaseIPs(ctx, opts)
		if err != nil {
			return fmt.Errorf("released %d leaked IPs, then: %w", released, err)
		}
		released += len(opts) - len(unallocated)
		skipped += len(unallocated)
	}
	fmt.Fprintf(o.Stdout, "Released %d leaked IPs; skipped %d that were released or reallocated since the report and %d that are in use now.\n",
		released, skipped, inUse)

	deleted, kept, err := deleteOrphanHandles(ctx, c, al, rep.HandlesWithoutIPs)
	if err != nil {
		return err
	}
	fmt.Fprintf(o.Stdout, "Deleted %d handles with no IPs; skipped %d that changed since the report.\n", deleted, kept)

	freed, nodes, back, err := releaseStaleAffinities(ctx, c, al, rep.StaleAffinities)
	if err != nil {
		return err
	}
	fmt.Fprintf(o.Stdout, "Released %d block affinities of %d nodes that do not exist; skipped %d nodes that exist again.\n", freed, nodes, back)
	if n := len(rep.UnallocatedIPs) + len(rep.MissingHandles); n > 0 {
		fmt.Fprintf(o.Stdout, "Left %d problems that release does not fix (in-use IPs without allocation, missing handles); see the report.\n", n)
	}
	return nil
}

// deleteOrphanHandles deletes each handle only if no block refers to it now
// and it is unchanged since the report (compare-and-swap on its revision).
func deleteOrphanHandles(ctx context.Context, c *store.Client, al *ipam.Allocator, handles []orphanHandle) (deleted, kept int, err error) {
	if len(handles) == 0 {
		return 0, 0, nil
	}
	blocks, err := al.ListBlocks(ctx)
	if err != nil {
		return 0, 0, err
	}
	used := map[string]bool{}
	for _, b := range blocks {
		for _, a := range b.Allocations() {
			used[a.Handle] = true
		}
	}
	for _, h := range handles {
		if used[h.Handle] || h.Revision <= 0 { // no revision would delete unconditionally
			kept++
			continue
		}
		err := c.Delete(ctx, store.Key{Kind: store.KindIPAMHandle, Name: h.Handle}, store.Revision(strconv.FormatInt(h.Revision, 10)))
		switch {
		case err == nil:
			deleted++
		case errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrNotFound):
			kept++
		default:
			return deleted, kept, fmt.Errorf("deleting handle %s: %w", h.Handle, err)
		}
	}
	return deleted, kept, nil
}

// releaseStaleAffinities gives up the blocks of every reported node that
// still has no Node resource: empty blocks are deleted, blocks in use lose
// their affinity and keep their addresses.
func releaseStaleAffinities(ctx context.Context, c *store.Client, al *ipam.Allocator, stale []staleAffinity) (freed, nodes, back int, err error) {
	nodeKind, _ := api.LookupKind("Node")
	seen := map[string]bool{}
	for _, s := range stale {
		if seen[s.Node] {
			continue
		}
		seen[s.Node] = true
		_, err := c.GetResource(ctx, nodeKind, "", s.Node)
		switch {
		case err == nil:
			back++
			continue
		case !errors.Is(err, store.ErrNotFound):
			return freed, nodes, back, err
		}
		n, err := al.ReleaseNodeAffinities(ctx, s.Node, false)
		freed += n
		if err != nil {
			return freed, nodes, back, fmt.Errorf("releasing the blocks of node %s: %w", s.Node, err)
		}
		nodes++
	}
	return freed, nodes, back, nil
}

const ipamConfigureUsage = "Usage:\n  calicoctl ipam configure [--strictaffinity=<true/false>] [--max-blocks-per-host=<number>] [--autoallocateblocks=<true/false>] [--config=<CONFIG>]"

func runIPAMConfigure(o IO, args []string) error {
	fs := newFlagSet("ipam configure", o)
	var ds datastoreFlags
	ds.register(fs)
	strict := fs.String("strictaffinity", "", "true: nodes never borrow addresses from other nodes' blocks")
	maxBlocks := fs.String("max-blocks-per-host", "", "most blocks one node may claim (0: no limit)")
	auto := fs.String("autoallocateblocks", "", "false: nodes never claim new blocks")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 || (!fs.Changed("strictaffinity") && !fs.Changed("max-blocks-per-host") && !fs.Changed("autoallocateblocks")) {
		return usageError(o, ipamConfigureUsage)
	}
	parseBool := func(name, v string) (bool, error) {
		switch v {
		case "true":
			return true, nil
		case "false":
			return false, nil
		}
		return false, fmt.Errorf("invalid value %q for --%s: use true or false", v, name)
	}
	var sa, aa bool
	var mb int
	var err error
	if fs.Changed("strictaffinity") {
		if sa, err = parseBool("strictaffinity", *strict); err != nil {
			return err
		}
	}
	if fs.Changed("autoallocateblocks") {
		if aa, err = parseBool("autoallocateblocks", *auto); err != nil {
			return err
		}
	}
	if fs.Changed("max-blocks-per-host") {
		n, perr := strconv.ParseInt(*maxBlocks, 10, 64)
		if perr != nil || n < 0 || n > math.MaxInt32 {
			return fmt.Errorf("invalid value %q for --max-blocks-per-host: use a whole number from 0 (no limit) to %d", *maxBlocks, math.MaxInt32)
		}
		mb = int(n)
	}
	ctx := context.Background()
	c, err := connect(ctx, &ds, o)
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = ipam.New(c).SetConfig(ctx, func(cfg *ipam.Config) {
		if fs.Changed("strictaffinity") {
			cfg.StrictAffinity = sa
		}
		if fs.Changed("autoallocateblocks") {
			cfg.AutoAllocateBlocks = aa
		}
		if fs.Changed("max-blocks-per-host") {
			cfg.MaxBlocksPerHost = mb
		}
	})
	if err != nil {
		return datastoreError(c, err)
	}
	if fs.Changed("strictaffinity") {
		fmt.Fprintf(o.Stdout, "Successfully set StrictAffinity to: %v\n", sa)
	}
	if fs.Changed("autoallocateblocks") {
		fmt.Fprintf(o.Stdout, "Successfully set AutoAllocateBlocks to: %v\n", aa)
	}
	if fs.Changed("max-blocks-per-host") {
		fmt.Fprintf(o.Stdout, "Successfully set MaxBlocksPerHost to: %d\n", mb)
	}
	return nil
}
