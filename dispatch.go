package main

import (
	"fmt"
	"path/filepath"
	"strings"
)

// Role is what the binary acts as for one invocation.
type Role string

// The roles of the multi-call binary.
const (
	RoleCNI     Role = "cni"     // CNI plugin ("calico")
	RoleIPAM    Role = "ipam"    // CNI IPAM plugin ("calico-ipam")
	RoleNode    Role = "node"    // node agent ("calico-node")
	RoleCtl     Role = "ctl"     // operator CLI ("calicoctl")
	RoleVersion Role = "version" // print the version
)

// byName maps invocation names (argv[0] base names and subcommands) to roles.
var byName = map[string]Role{
	"calico":      RoleCNI,
	"cni":         RoleCNI,
	"calico-ipam": RoleIPAM,
	"ipam":        RoleIPAM,
	"calico-node": RoleNode,
	"node":        RoleNode,
	"calicoctl":   RoleCtl,
	"ctl":         RoleCtl,
	"version":     RoleVersion,
	"--version":   RoleVersion,
}

// chooseRole decides the role from argv and the environment. It is pure: the
// environment is read only through getenv. It returns the arguments left for
// the role (without the program name or the role subcommand).
func chooseRole(argv []string, getenv func(string) string) (Role, []string, error) {
	if len(argv) == 0 {
		return "", nil, fmt.Errorf("no program name in argv")
	}
	name := filepath.Base(argv[0])
	rest := argv[1:]
	switch name {
	case "calico-ipam":
		return RoleIPAM, rest, nil
	case "calico-node":
		return RoleNode, rest, nil
	case "calicoctl":
		return RoleCtl, rest, nil
	case "calico":
		// The CNI runtime always sets CNI_COMMAND; without it "calico" is
		// the multi-call binary like any other name.
		if getenv("CNI_COMMAND") != "" {
			return RoleCNI, rest, nil
		}
	}
	if len(rest) == 0 {
		return "", nil, fmt.Errorf("usage: %s <%s> [args...]", name, strings.Join(subcommands(), "|"))
	}
	role, ok := byName[rest[0]]
	if !ok {
		return "", nil, fmt.Errorf("unknown role %q: want one of %s", rest[0], strings.Join(subcommands(), ", "))
	}
	return role, rest[1:], nil
}

func subcommands() []string {
	return []string{"node", "ctl", "cni", "ipam", "version"}
}
