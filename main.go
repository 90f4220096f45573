// MPTCP sockets break TCP_MD5SIG (BGP passwords); see GOBGP-NOTES trap 1.
//go:debug multipathtcp=0

// Command calico-aio is one binary with four roles, chosen by the name it is
// invoked under: the CNI plugin (calico), the CNI IPAM plugin (calico-ipam),
// the node agent (calico-node) and the operator CLI (calicoctl).
package main

import (
	"fmt"
	"os"

	"github.com/calico-aio/calico-aio/build/gcoff"
	"github.com/calico-aio/calico-aio/build/version"
	// Linked for its init: CNI calls, through calico-node (cni/fastpath) or
	// in-process as soon as the plugin's own packages are initialised.
	_ "github.com/calico-aio/calico-aio/cni/inproc"
)

func main() {
	role, args, err := chooseRole(os.Args, os.Getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if role == RoleCNI || role == RoleIPAM {
		gcoff.ShortLived()
	} else {
		gcoff.Restore()
	}
	os.Exit(run(role, args))
}

// run executes a role with its arguments and returns the process exit code.
func run(role Role, args []string) int {
	switch role {
	case RoleVersion:
		fmt.Println(version.Version)
		return 0
	case RoleCtl:
		return runCtl(args)
	case RoleNode:
		return runNode(args)
	case RoleCNI:
		return runCNI(args)
	case RoleIPAM:
		return runIPAM(args)
	}
	fmt.Fprintf(os.Stderr, "role %q is not implemented yet\n", role)
	return 1
}
