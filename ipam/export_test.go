package ipam

// WaitPrefetch waits for the read a Prefetch started (tests only).
func (a *Allocator) WaitPrefetch() {
	if a.pre != nil {
		<-a.pre.done
	}
}
