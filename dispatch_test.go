package main

import (
	"reflect"
	"testing"
)

func TestChooseRole(t *testing.T) {
	env := func(m map[string]string) func(string) string {
		return func(k string) string { return m[k] }
	}
	none := env(nil)
	cniEnv := env(map[string]string{"CNI_COMMAND": "ADD"})
	tests := []struct {
		name     string
		argv     []string
		getenv   func(string) string
		wantRole Role
		wantArgs []string
		wantErr  bool
	}{
		{"cni plugin", []string{"/opt/cni/bin/calico"}, cniEnv, RoleCNI, []string{}, false},
		{"calico without CNI_COMMAND is multi-call", []string{"calico", "ctl", "get", "nodes"}, none, RoleCtl, []string{"get", "nodes"}, false},
		{"ipam plugin", []string{"/opt/cni/bin/calico-ipam"}, cniEnv, RoleIPAM, []string{}, false},
		{"ipam plugin without env", []string{"calico-ipam", "-v"}, none, RoleIPAM, []string{"-v"}, false},
		{"node agent", []string{"/usr/bin/calico-node", "--nodename", "n1"}, none, RoleNode, []string{"--nodename", "n1"}, false},
		{"calicoctl", []string{"calicoctl", "get", "ippools"}, none, RoleCtl, []string{"get", "ippools"}, false},
		{"subcommand node", []string{"./bin/calico-aio", "node", "--ip", "1.2.3.4"}, none, RoleNode, []string{"--ip", "1.2.3.4"}, false},
		{"subcommand ctl", []string{"calico-aio", "ctl", "apply", "-f", "-"}, none, RoleCtl, []string{"apply", "-f", "-"}, false},
		{"subcommand calicoctl", []string{"calico-aio", "calicoctl", "version"}, none, RoleCtl, []string{"version"}, false},
		{"subcommand cni", []string{"calico-aio", "cni"}, cniEnv, RoleCNI, []string{}, false},
		{"subcommand ipam", []string{"calico-aio", "ipam"}, none, RoleIPAM, []string{}, false},
		{"subcommand version", []string{"calico-aio", "version"}, none, RoleVersion, []string{}, false},
		{"wrong role", []string{"calico-aio", "frobnicate"}, none, "", nil, true},
		{"no role", []string{"calico-aio"}, none, "", nil, true},
		{"empty argv", nil, none, "", nil, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			role, args, err := chooseRole(tc.argv, tc.getenv)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if role != tc.wantRole {
				t.Errorf("role = %q, want %q", role, tc.wantRole)
			}
			if !tc.wantErr && !reflect.DeepEqual(args, tc.wantArgs) {
				t.Errorf("args = %q, want %q", args, tc.wantArgs)
			}
		})
	}
}
