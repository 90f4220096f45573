package cni

import (
	"io"
	"os"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/calico-aio/calico-aio/ipam"
	"github.com/calico-aio/calico-aio/store"
)

// backend is what one plugin invocation runs against: where its result is
// printed and which datastore client it uses. In-process, the result goes
// to stdout and each invocation dials its own client; in calico-node
// (agent.go) the result goes back over the socket and the agent's warm
// client is shared.
type backend struct {
	out    io.Writer
	shared *store.Client // nil: dial one from the netconf
	// hints are the agent's memory of the node's blocks across calls
	// (ipam.BlockHints); nil in-process.
	hints *ipam.BlockHints
	// getenv is the caller's environment (the agent serves other
	// processes' calls); nil: this process's.
	getenv func(string) string
}

func (b backend) env() func(string) string {
	if b.getenv != nil {
		return b.getenv
	}
	return os.Getenv
}

// print writes a result converted to the netconf's CNI version.
func (b backend) print(r types.Result, cniVersion string) error {
	v, err := r.GetAsVersion(cniVersion)
	if err != nil {
		return err
	}
	return v.PrintTo(b.out)
}
