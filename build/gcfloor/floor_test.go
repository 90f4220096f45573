package gcfloor

import (
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

func TestFloorPercent(t *testing.T) {
	for _, c := range []struct {
		live, floor uint64
		want        int
	}{
		{0, 32 << 20, 100},
		{4 << 20, 32 << 20, 700},  // goal 32 MiB
		{8 << 20, 32 << 20, 300},  // goal 32 MiB
		{16 << 20, 32 << 20, 100}, // 2 x live is the floor
		{40 << 20, 32 << 20, 100}, // as GOGC=100
	} {
		if got := floorPercent(c.live, c.floor); got != c.want {
			t.Errorf("live %d floor %d: percent %d, want %d", c.live, c.floor, got, c.want)
		}
	}
}

// After a collection the setting in force puts the next goal at the
// floor, and it follows the live heap when that grows past half of it.
func TestHeapFloorSetsThePercentAfterEachCycle(t *testing.T) {
	t.Setenv("GOGC", "")
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	HeapFloor(256 << 20)
	runtime.GC()
	if p := waitPercent(t, func(p int) bool { return p > 400 }); p <= 400 {
		t.Fatalf("GC percent %d after a cycle with a small live heap under a 256 MiB floor, want the floor's", p)
	}
	keep := make([][]byte, 0, 200)
	for range 200 { // 200 MiB live: over half the floor
		keep = append(keep, make([]byte, 1<<20))
	}
	runtime.GC()
	if p := waitPercent(t, func(p int) bool { return p == 100 }); p != 100 {
		t.Fatalf("GC percent %d with a live heap over half the floor, want 100", p)
	}
	runtime.KeepAlive(keep)
}

// waitPercent polls the GC percent (the finalizer runs on its own
// goroutine after the cycle) until ok or a few seconds pass.
func waitPercent(t *testing.T, ok func(int) bool) int {
	t.Helper()
	var p int
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		p = debug.SetGCPercent(-1)
		debug.SetGCPercent(p)
		if ok(p) {
			return p
		}
		runtime.GC()
	}
	return p
}
