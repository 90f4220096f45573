package main

import (
	"os"

	"github.com/calico-aio/calico-aio/cni"
	"github.com/calico-aio/calico-aio/ctl"
	"github.com/calico-aio/calico-aio/felix"
)

func runCtl(args []string) int {
	return ctl.Main(args, ctl.IO{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv})
}

func runNode(args []string) int { return felix.Main(args) }
func runCNI(args []string) int  { return cni.Main() }
func runIPAM(args []string) int { return cni.IPAMMain() }
