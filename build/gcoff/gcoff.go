// Package gcoff turns the garbage collector off while packages initialise.
//
// The binary links etcd's server, gRPC and GoBGP; their package init
// functions allocate a few megabytes, which would cost a GC cycle in every
// short-lived CNI invocation. Go initialises packages in import-path order
// once their dependencies are done, so this package (which depends only on
// runtime/debug) runs before those heavy ones. main calls Restore.
package gcoff

import (
	"os"
	"runtime/debug"
)

func init() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(-1)
	}
}

// Restore puts the collector back to normal (GOGC=100) for long-running roles.
func Restore() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(100)
	}
}

// shortLivedLimit is the heap at which a CNI call's process collects
// garbage at all (it normally exits first).
const shortLivedLimit = 256 << 20

// ShortLived keeps the collector off but bounds the heap, for processes
// that exit within milliseconds (CNI plugins): collect only past
// shortLivedLimit bytes.
func ShortLived() {
	if os.Getenv("GOGC") == "" {
		debug.SetMemoryLimit(shortLivedLimit)
	}
}
