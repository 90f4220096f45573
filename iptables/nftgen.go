package iptables

import (
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// Cheap drift checks. iptables-nft keeps every table in nf_tables, and the
// kernel counts committed nf_tables transactions in a per-namespace
// generation number (NFT_MSG_GETGEN): any change to any table, by anyone,
// through iptables-nft, ip6tables-nft or nft, moves it. A Table on the
// nf_tables backend records the generation at which its cached view was
// known to be the kernel's; the periodic resync then reads the table back
// only when the generation has moved since. The legacy backend has no such
// number: there the resync always reads back.

// nftGeneration returns the nf_tables generation of the calling thread's
// network namespace, asked over netlink (no binary run).
func nftGeneration() (uint32, error) {
	req := nl.NewNetlinkRequest(unix.NFNL_SUBSYS_NFTABLES<<8|unix.NFT_MSG_GETGEN, 0)
	req.AddData(&nl.Nfgenmsg{NfgenFamily: unix.AF_UNSPEC, Version: unix.NFNETLINK_V0})
	msgs, err := req.Execute(unix.NETLINK_NETFILTER, 0)
	if err != nil {
		return 0, fmt.Errorf("nf_tables generation: %w", err)
	}
	for _, m := range msgs {
		if len(m) < nl.SizeofNfgenmsg {
			continue
		}
		attrs, err := nl.ParseRouteAttr(m[nl.SizeofNfgenmsg:])
		if err != nil {
			return 0, fmt.Errorf("nf_tables generation: %w", err)
		}
		for _, a := range attrs {
			if a.Attr.Type == unix.NFTA_GEN_ID && len(a.Value) == 4 {
				return binary.BigEndian.Uint32(a.Value), nil
			}
		}
	}
	return 0, fmt.Errorf("nf_tables generation: no NFTA_GEN_ID in the reply")
}

// isNFTBackend reports whether save (an iptables-save binary) works on
// nf_tables: its --version says "(nf_tables)". A probe of the binary, run
// directly: not a save, so neither observed nor faked.
func isNFTBackend(save string) bool {
	out, _, err := runCommand(nil, save, "--version")
	return err == nil && strings.Contains(string(out), "nf_tables")
}

// generation is the kernel's nf_tables generation when the table is on
// that backend (asked of the binary once per Table); ok false otherwise or
// when it cannot be read.
func (t *Table) generation() (gen uint32, ok bool) {
	if t.nft == 0 {
		t.nft = -1
		if isNFTBackend(t.save) {
			t.nft = 1
		}
	}
	if t.nft < 0 {
		return 0, false
	}
	gen, err := nftGeneration()
	return gen, err == nil
}

// Generations follows the nf_tables generation of one network namespace
// for the Tables that share it: gen is the generation after the last
// transaction known to be ours, while ok; every foreign transaction seen
// (the generation moved by more than our own restores) starts a new
// epoch. A Table whose cache was known exact in the current epoch, with
// the kernel still at gen, holds what the kernel holds.
type Generations struct {
	gen   uint32
	ok    bool
	epoch uint64
}

// begin notes the generation before a Table's apply: one other than gen
// means someone else committed since, and a new epoch starts.
func (g *Generations) begin(now uint32) {
	if !g.ok || now != g.gen {
		g.epoch++
		g.gen, g.ok = now, true
	}
}

// end notes the generation after a Table's successful apply, which ran
// from start to now, restored or not, from a fresh read or its cache
// exact in epoch; it returns the epoch in which the Table's cache is now
// known exact (0: not known).
func (g *Generations) end(start, now uint32, restored, fresh bool, epoch uint64) uint64 {
	want := start
	if restored {
		want++
	}
	if now != want { // someone else committed meanwhile
		g.ok = false
		return 0
	}
	g.gen = now
	if fresh || epoch == g.epoch {
		return g.epoch
	}
	return 0
}

// current reports whether a cache known exact in epoch still is.
func (g *Generations) current(now uint32, epoch uint64) bool {
	return g.ok && epoch != 0 && epoch == g.epoch && now == g.gen
}

// Resync is the periodic check for drift made by others: the next Apply
// reads the table back (as after InvalidateCache) unless the table is on
// the nf_tables backend and nothing but our own restores has changed
// nf_tables since its cached view was known to be the kernel's. No I/O
// here.
func (t *Table) Resync() { t.recheck = true }

// checkGeneration does what Resync asked, in Apply (so in the caller's
// network namespace).
func (t *Table) checkGeneration() {
	t.recheck = false
	if t.cache == nil {
		return
	}
	if g, ok := t.generation(); ok && t.gens.current(g, t.epoch) {
		return
	}
	t.InvalidateCache()
}
