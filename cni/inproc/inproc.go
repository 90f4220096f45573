// Package inproc runs a CNI call in-process (calico-node not serving it)
// as soon as the packages the plugin needs are initialised, so the call
// does not pay for the rest of the binary's (the embedded etcd server,
// GoBGP, the agent, calicoctl).
//
// Go initialises, at each step, the first package in import-path order
// whose imports are all done (Go spec, since 1.21): this package's init
// runs once the CNI plugin's own dependencies are, and before the packages
// that import the agent's or calicoctl's own (the embedded etcd server's
// embed and etcdserver, felix/config, ctl: TestCNIFastPathInitOrder, e2e,
// holds this). Third-party packages only the other roles need but whose
// imports are done earlier still come first when their path sorts before
// the plugin's last dependency (k8s.io/client-go): GoBGP's, Prometheus's,
// most of etcd's server (docs/PERFORMANCE.md, ninth pass).
package inproc

import (
	"os"
	"path/filepath"

	"github.com/calico-aio/calico-aio/build/gcoff"
	"github.com/calico-aio/calico-aio/cni"
	// Imported for its init, which must run first: with the agent serving
	// the call, the process never gets here.
	_ "github.com/calico-aio/calico-aio/cni/fastpath"
)

func init() {
	var run func() int
	switch filepath.Base(os.Args[0]) {
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
	gcoff.ShortLived()
	os.Exit(run())
}
