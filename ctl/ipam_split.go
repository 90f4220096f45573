package ctl

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"math/bits"
	"net/netip"
	"strconv"
	"time"

	"github.com/calico-aio/calico-aio/store"
	"github.com/calico-aio/calico-aio/store/api"
)

const ipamSplitUsage = "Usage:\n  calicoctl ipam split <NUMBER> [--cidr=<CIDR>] [--name=<POOL_NAME>] [--config=<CONFIG>]"

// runIPAMSplit is "calicoctl ipam split N --cidr=C | --name=P": the pool
// becomes N (a power of 2) equal pools named split-<name>-<i>, copies of
// it (every stored field kept) with their own CIDR, enabled. Calico asks for
// a datastore lock first because it writes pool by pool; here the new pools
// and the removal of the old one are one etcd transaction, conditional on
// the old pool being unchanged, so no allocation ever sees a half-split
// state. Blocks and allocations stay as they are: a pool whose blocks are
// larger than the new pools is refused, so every block lies in one new pool.
func runIPAMSplit(o IO, args []string) error {
	fs := newFlagSet("ipam split", o)
	var ds datastoreFlags
	ds.register(fs)
	cidr := fs.String("cidr", "", "CIDR of the IP pool to split")
	name := fs.String("name", "", "name of the IP pool to split")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageError(o, ipamSplitUsage)
	}
	n, err := strconv.Atoi(fs.Arg(0))
	if err != nil {
		return fmt.Errorf("error reading number to split IP pools into. %s is not a valid number: %w", fs.Arg(0), err)
	}
	if *cidr == "" && *name == "" {
		return fmt.Errorf("no name or CIDR provided. Provide a name or CIDR to denote the IP pool to split")
	}
	ctx := context.Background()
	c, err := connect(ctx, &ds, o)
	if err != nil {
		return err
	}
	defer c.Close()
	pools, err := loadPools(ctx, c)
	if err != nil {
		return datastoreError(c, err)
	}
	var old *api.IPPool
	for _, p := range pools {
		if (*name != "" && p.Metadata.Name == *name) || (*name == "" && p.Spec.CIDR == *cidr) {
			old = p
		}
	}
	if old == nil {
		return fmt.Errorf("unable to find IP pool %s covering the specified CIDR %s", *name, *cidr)
	}
	children, err := splitPool(old, n)
	if err != nil {
		return err
	}
	if err := swapPools(ctx, c, old, children); err != nil {
		return datastoreError(c, err)
	}
	fmt.Fprintf(o.Stdout, "IP Pool %s was successfully split into %d smaller pools.\n", old.Metadata.Name, n)
	for _, ch := range children {
		fmt.Fprintf(o.Stdout, "Created %s with CIDR %s.\n", ch.Metadata.Name, ch.Spec.CIDR)
	}
	fmt.Fprintln(o.Stdout, "Please refer to the documentation for final steps.")
	return nil
}

// splitCIDR cuts a prefix into n equal ones (n a power of 2, at least 2).
func splitCIDR(p netip.Prefix, n int) ([]netip.Prefix, error) {
	if n < 2 || n&(n-1) != 0 {
		return nil, fmt.Errorf("number to split CIDR into is not a valid power of 2: %d", n)
	}
	p = p.Masked()
	extra := bits.TrailingZeros(uint(n))
	newBits := p.Bits() + extra
	if newBits > p.Addr().BitLen() {
		return nil, fmt.Errorf("the CIDR %s is not large enough to be split into %d parts", p, n)
	}
	step := new(big.Int).Lsh(big.NewInt(1), uint(p.Addr().BitLen()-newBits))
	cur := new(big.Int).SetBytes(p.Addr().AsSlice())
	out := make([]netip.Prefix, 0, n)
	for range n {
		b := make([]byte, p.Addr().BitLen()/8)
		cur.FillBytes(b)
		a, _ := netip.AddrFromSlice(b)
		out = append(out, netip.PrefixFrom(a, newBits))
		cur.Add(cur, step)
	}
	return out, nil
}

// splitPool builds the new pools from the old one.
func splitPool(old *api.IPPool, n int) ([]*api.IPPool, error) {
	pfx, err := netip.ParsePrefix(old.Spec.CIDR)
	if err != nil {
		return nil, fmt.Errorf("error reading CIDR %s before attempting to split it: %w", old.Spec.CIDR, err)
	}
	parts, err := splitCIDR(pfx, n)
	if err != nil {
		return nil, fmt.Errorf("error splitting the CIDR %s into %d CIDRs: %w", old.Spec.CIDR, n, err)
	}
	old.Default()
	if bs := old.Spec.BlockSize; bs < parts[0].Bits() {
		return nil, fmt.Errorf("cannot split IP pool %s into %d: its blockSize %d is larger than the /%d pools it would become (its blocks would straddle them); pick a smaller number",
			old.Metadata.Name, n, bs, parts[0].Bits())
	}
	raw, err := api.Marshal(old)
	if err != nil {
		return nil, err
	}
	out := make([]*api.IPPool, 0, n)
	for i, part := range parts {
		r, err := api.Decode(raw)
		if err != nil {
			return nil, err
		}
		ch := r.(*api.IPPool)
		newName := fmt.Sprintf("split-%s-%d", old.Metadata.Name, i)
		if len(newName) > 253 {
			newName = fmt.Sprintf("split-%s-%d", old.Metadata.Name[:245], i)
		}
		ch.Metadata = api.ObjectMeta{Name: newName, Labels: old.Metadata.Labels, Annotations: old.Metadata.Annotations,
			UID: store.NewUID(), CreationTimestamp: time.Now().UTC().Format(time.RFC3339)}
		ch.Spec.CIDR = part.String()
		ch.Spec.Disabled = false
		if err := ch.Validate(); err != nil {
			return nil, fmt.Errorf("split pool %s: %w", newName, err)
		}
		out = append(out, ch)
	}
	return out, nil
}

// swapPools writes the new pools and deletes the old one in one commit,
// only if the old one is unchanged and no new name is taken (the new pools
// first: a backend that commits one write at a time and stops at a lost
// one never drops the old pool before its replacements are in).
func swapPools(ctx context.Context, c *store.Client, old *api.IPPool, children []*api.IPPool) error {
	k, _ := api.LookupKind("IPPool")
	var writes []store.Write
	for _, ch := range children {
		val, err := store.Encode(ch)
		if err != nil {
			return err
		}
		writes = append(writes, store.Write{Op: store.OpPut, Key: store.ResourceKey(k, "", ch.Metadata.Name), Value: val})
	}
	writes = append(writes, store.Write{Op: store.OpDelete, Key: store.ResourceKey(k, "", old.Metadata.Name),
		Revision: store.Revision(old.Metadata.ResourceVersion)})
	_, err := c.Commit(ctx, writes)
	if errors.Is(err, store.ErrInvalidRevision) {
		return fmt.Errorf("IP pool %s: metadata.resourceVersion: %w", old.Metadata.Name, err)
	}
	if err != nil && !errors.Is(err, store.ErrConflict) {
		return fmt.Errorf("splitting IP pool %s: %w", old.Metadata.Name, err)
	}
	if err != nil {
		return fmt.Errorf("splitting IP pool %s: the pool changed or a split-%s-N pool already exists; nothing was written", old.Metadata.Name, old.Metadata.Name)
	}
	return nil
}
