// Package gcfloor keeps a long-running process from collecting garbage
// while its heap is small (HeapFloor). Apart from build/gcoff so that the
// CNI roles, which import that one early, do not initialise
// runtime/metrics.
package gcfloor

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
)

// HeapFloor runs the collector as GOGC=100 does, except that the heap may
// grow to floor bytes before a cycle starts: after each cycle the GC
// percentage is set so that the next goal is max(2 x live heap, floor).
// The agent's live heap on a small node is a few megabytes, so at GOGC=100
// it collected every few megabytes allocated (at 250 pods about once per
// two CNI calls, several ms of CPU each); a node whose live heap is over
// half the floor collects exactly as before. Left alone when GOGC is set.
func HeapFloor(floor uint64) {
	if os.Getenv("GOGC") != "" {
		return
	}
	t := &floorTuner{floor: floor, pct: 100}
	debug.SetGCPercent(100)
	t.tune()
	t.arm()
}

// floorTuner is used by one goroutine at a time: HeapFloor, then the
// finalizers (which run one after another).
type floorTuner struct {
	floor uint64
	pct   int
}

// cycleMark is an object nothing refers to: its finalizer runs once the
// cycle that found it unreachable is done, and re-arms a new one.
type cycleMark struct{ t *floorTuner }

func (t *floorTuner) arm() {
	runtime.SetFinalizer(&cycleMark{t: t}, func(m *cycleMark) {
		m.t.tune()
		m.t.arm()
	})
}

// floorPercent is the GC percentage that puts the next goal at
// max(2 x live, floor).
func floorPercent(live, floor uint64) int {
	if live == 0 || 2*live >= floor {
		return 100
	}
	return int((floor - live) * 100 / live)
}

func (t *floorTuner) tune() {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return
	}
	pct := floorPercent(s[0].Value.Uint64(), t.floor)
	// Within a tenth of the setting in use: not worth a change.
	if diff := pct - t.pct; diff*10 > t.pct || -diff*10 > t.pct {
		debug.SetGCPercent(pct)
		t.pct = pct
	}
}
