package ipam

import (
	"encoding/json"
	"net/netip"
	"strings"
	"testing"

	"github.com/calico-aio/calico-aio/store"
)

func storedBlock(t *testing.T, name string, b *Block) store.Object {
	t.Helper()
	v, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	return store.Object{Key: store.Key{Kind: store.KindIPAMBlock, Name: name}, Value: v, Revision: "7"}
}

// A snapshot's blocks stay unparsed until looked into, and a full one is
// known full without parsing it, however its free list was written.
func TestLazyBlocks(t *testing.T) {
	p := netip.MustParsePrefix("10.9.0.0/30")
	free := newBlock(p, "n1", "")
	full := newBlock(netip.MustParsePrefix("10.9.0.4/30"), "n1", "")
	full.autoAssign(netip.MustParsePrefix("10.9.0.4/30"), 4, "h", nil)
	nilList := newBlock(netip.MustParsePrefix("10.9.0.8/30"), "n1", "")
	nilList.autoAssign(netip.MustParsePrefix("10.9.0.8/30"), 4, "h", nil)
	nilList.Unallocated = nil // "unallocated":null
	pretty := storedBlock(t, "10.9.0.12/30", func() *Block {
		b := newBlock(netip.MustParsePrefix("10.9.0.12/30"), "n1", "")
		b.autoAssign(netip.MustParsePrefix("10.9.0.12/30"), 4, "h", nil)
		return b
	}())
	pretty.Value = []byte(strings.ReplaceAll(string(pretty.Value), `"unallocated":[]`, `"unallocated": [ ]`))
	wrongKey := storedBlock(t, "10.9.0.16/30", free)

	got, err := lazyBlocks([][]store.Object{{storedBlock(t, "10.9.0.0/30", free), storedBlock(t, "10.9.0.4/30", full),
		storedBlock(t, "10.9.0.8/30", nilList), pretty, wrongKey}})
	if err != nil {
		t.Fatal(err)
	}
	for cidr, bk := range got {
		if bk.block != nil || bk.rev != "7" {
			t.Fatalf("%s parsed before use (rev %q)", cidr, bk.rev)
		}
	}
	for cidr, want := range map[string]bool{"10.9.0.4/30": true, "10.9.0.8/30": true} {
		if got[cidr].full() != want || got[cidr].block != nil {
			t.Errorf("%s: full %v (parsed %v), want %v without parsing", cidr, got[cidr].full(), got[cidr].block != nil, want)
		}
	}
	if !got["10.9.0.12/30"].full() {
		t.Error("a full block written with blanks is not full")
	}
	if got["10.9.0.0/30"].full() || got["10.9.0.0/30"].block == nil || got["10.9.0.0/30"].block.Free() != 4 {
		t.Error("a block with free addresses: not parsed as free")
	}
	if err := got["10.9.0.16/30"].load(); err == nil || !strings.Contains(err.Error(), "10.9.0.0/30") {
		t.Errorf("a block stored under another CIDR's key loads with %v", err)
	}
}
