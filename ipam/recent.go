package ipam

import "errors"

// What an assignment decides only from the latest state, never from a
// recent snapshot (prefetch.go): anything taken from absence (no affine
// block with room: claim or borrow; no IPAM config: create it; no pool:
// refuse) and anything taken from the handle (its addresses reused, its
// delete finished). A recent snapshot that leads there is read again.

// errNeedsLatest: the assignment reached such a decision on a recent
// snapshot.
var errNeedsLatest = errors.New("ipam: this assignment needs the latest state")

// needsLatest: snap is recent and holds what is decided only from the
// latest state (the handle, or no stored config).
func (s *snapshot) needsLatest() bool {
	return s.recent && (s.handle != nil || s.deletedHandleRev != "" || !s.cfgStored)
}
