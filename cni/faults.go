package cni

import (
	"os"
	"syscall"
)

// faultEnv names a fault-injection point for tests: when CALICO_CNI_FAULT
// equals a point's name, the plugin kills itself there, as a crash would.
const faultEnv = "CALICO_CNI_FAULT"

// Fault points.
const (
	faultAfterIPAM   = "after-ipam"   // addresses allocated (the veth pair, made meanwhile, perhaps too), nothing configured
	faultAfterWiring = "after-wiring" // veth wired, endpoint not written
)

func crashIf(point string) {
	if os.Getenv(faultEnv) == point {
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	}
}
