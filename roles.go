package main

import (
	"fmt"
	"os"
)

func notYet(role string) int {
	fmt.Fprintf(os.Stderr, "%s: not implemented yet\n", role)
	return 1
}

func runCtl(args []string) int  { return notYet("calicoctl") }
func runNode(args []string) int { return notYet("calico-node") }
func runCNI(args []string) int  { return notYet("calico (CNI plugin)") }
func runIPAM(args []string) int { return notYet("calico-ipam") }
