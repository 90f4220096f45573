// Package inproc runs a CNI call in-process (calico-node not serving it)
// as soon as the packages the plugin needs are initialised, so the call
// does not pay for the rest of the binary's (the embedded etcd server,
// GoBGP, the agent, calicoctl).
//
// Go initialises packages in import-path order, each as soon as its imports
// are done (Go spec, since 1.21): this package's init runs once the CNI
// plugin's own dependencies are, and before the packages only the other
// roles link. TestCNIInProcessInitOrder (e2e) holds this.
package inproc

import (
	"os"

	"github.com/calico-aio/calico-aio/build/gcoff"
	"github.com/calico-aio/calico-aio/cni"
	// Imported for its init, which must run first: with the agent serving
	// the call, the process never gets here.
	_ "github.com/calico-aio/calico-aio/cni/fastpath"
)

// shortLivedLimit is the heap at which a CNI call's process collects
// garbage at all (it normally exits first).
const shortLivedLimit = 256 << 20

func init() {
	var run func() int
	switch baseName(os.Args[0]) {
	case "calico":
		if os.Getenv("CNI_COMMAND") == "" {
			return // the multi-call binary under another name: main decides
		}
		run = cni.Main
	case "calico-ipam":
		run = cni.IPAMMain
	default:
		return
	}
	gcoff.ShortLived(shortLivedLimit)
	os.Exit(run())
}

func baseName(p string) string {
	for i := len(p) - 1; i >= 0; i-- {
		if p[i] == '/' {
			return p[i+1:]
		}
	}
	return p
}
