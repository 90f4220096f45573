package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"
)

// cniCall is one exec of the binary as a CNI plugin.
type cniCall struct {
	Plugin      string // argv[0]: "calico" or "calico-ipam"
	Command     string // ADD, DEL, CHECK, STATUS, GC, VERSION
	ContainerID string
	Netns       string
	IfName      string
	Args        string
	Conf        string
}

// cniResult is what the plugin printed.
type cniResult struct {
	Stdout, Stderr string
	Err            error
}

// errorCode is the CNI error code printed on failure (0 when none).
func (r cniResult) errorCode() uint {
	var e struct {
		Code uint   `json:"code"`
		Msg  string `json:"msg"`
	}
	if json.Unmarshal([]byte(r.Stdout), &e) != nil {
		return 0
	}
	return e.Code
}

// ips returns the addresses of an ADD result.
func (r cniResult) ips(t *testing.T) []string {
	t.Helper()
	var res struct {
		IPs []struct {
			Address string `json:"address"`
		} `json:"ips"`
	}
	if err := json.Unmarshal([]byte(r.Stdout), &res); err != nil {
		t.Fatalf("result %q: %v", r.Stdout, err)
	}
	var out []string
	for _, ip := range res.IPs {
		out = append(out, ip.Address)
	}
	return out
}

func runCNI(c cniCall) cniResult {
	cmd := exec.Command(binary)
	cmd.Args = []string{c.Plugin}
	netns := c.Netns
	if netns == "" {
		netns = "/var/run/netns/none"
	}
	ifname := c.IfName
	if ifname == "" {
		ifname = "eth0"
	}
	cmd.Env = []string{
		"CNI_COMMAND=" + c.Command, "CNI_CONTAINERID=" + c.ContainerID, "CNI_NETNS=" + netns,
		"CNI_IFNAME=" + ifname, "CNI_ARGS=" + c.Args, "CNI_PATH=/opt/cni/bin", "PATH=/usr/sbin:/usr/bin:/sbin:/bin",
	}
	if c.Netns == "" {
		cmd.Env = append(cmd.Env, "CNI_NETNS_OVERRIDE=1")
	}
	cmd.Stdin = strings.NewReader(c.Conf)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	return cniResult{Stdout: out.String(), Stderr: errb.String(), Err: err}
}

// ipamConf is a calico-ipam netconf for one node.
func ipamConf(version, network, node, endpoint, dir string, extra string) string {
	return fmt.Sprintf(`{"cniVersion":%q,"name":%q,"type":"calico","nodename":%q,"etcd_endpoints":%q,
"calico_lib_dir":%q,"calico_run_dir":%q,"ipam":{"type":"calico-ipam"%s}}`,
		version, network, node, endpoint, dir+"/lib", dir+"/run", extra)
}
