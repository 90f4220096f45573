package model

import "context"

// Recent reads. A read made under a context marked by RecentReads may be
// answered from a cache of recent state rather than the latest: on the
// Kubernetes datastore, the apiserver's watch cache (resourceVersion "0",
// no read from etcd, a tenth of the time); etcd reads are always the
// latest. A get that finds nothing in the cache is made again for the
// latest, so absence is never taken from the cache. Mark only reads whose
// use tolerates a slightly old answer: what is decided from them is
// written with compare-and-swap, or is checked again before it matters.

type recentReadsKey struct{}

// RecentReads marks ctx's reads as allowed from a cache of recent state.
func RecentReads(ctx context.Context) context.Context {
	return context.WithValue(ctx, recentReadsKey{}, true)
}

// LatestReads undoes RecentReads: ctx's reads are of the latest state.
func LatestReads(ctx context.Context) context.Context {
	return context.WithValue(ctx, recentReadsKey{}, false)
}

// ReadsRecent: ctx's reads may be answered from a cache of recent state.
func ReadsRecent(ctx context.Context) bool { on, _ := ctx.Value(recentReadsKey{}).(bool); return on }
