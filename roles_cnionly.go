//go:build cnionly

package main

import (
	"fmt"
	"os"

	"github.com/calico-aio/calico-aio/cni"
)

// A build with -tags cnionly carries only the CNI roles (calico,
// calico-ipam): none of calico-node's packages (the embedded etcd server,
// GoBGP, the policy controller) nor calicoctl's, so each CNI call starts
// without initialising them. It measures what a CNI-only binary would
// gain (see docs/PERFORMANCE.md); the product ships the full binary.

func runCtl(args []string) int  { return notInBuild(RoleCtl) }
func runNode(args []string) int { return notInBuild(RoleNode) }
func runCNI(args []string) int  { return cni.Main() }
func runIPAM(args []string) int { return cni.IPAMMain() }

func notInBuild(r Role) int {
	fmt.Fprintf(os.Stderr, "role %q is not in this build (built with -tags cnionly)\n", r)
	return 1
}
