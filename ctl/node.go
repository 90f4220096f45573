package ctl

import (
	"encoding/json"
	"fmt"
	"net"
	"path/filepath"
	"time"

	"github.com/calico-aio/calico-aio/felix/peering"
)

func runNode(o IO, args []string) error {
	if len(args) > 0 {
		switch args[0] {
		case "checksystem":
			return runCheckSystem(o, args[1:])
		case "diags":
			return runDiags(o, args[1:])
		}
	}
	if len(args) == 0 || args[0] != "status" {
		return fmt.Errorf("usage: calicoctl node (status [--run-dir DIR] | checksystem [-f KERNEL_CONFIG] | diags [--log-dir DIR])")
	}
	fs := newFlagSet("node status", o)
	def := "/var/run/calico"
	if v := o.Getenv("CALICO_RUN_DIR"); v != "" {
		def = v
	}
	runDir := fs.String("run-dir", def, "calico-node's runtime directory (its status socket) [CALICO_RUN_DIR]")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	st, err := readNodeStatus(filepath.Join(*runDir, peering.StatusSocketName))
	if err != nil {
		fmt.Fprintln(o.Stdout, "Calico process is not running.")
		fmt.Fprintf(o.Stderr, "(no answer on %s: %v)\n", filepath.Join(*runDir, peering.StatusSocketName), err)
		return exitError{code: 1}
	}
	fmt.Fprintln(o.Stdout, "Calico process is running.")
	if !st.BGPEnabled {
		// Real calicoctl's words when no BGP daemon runs (backend none or
		// vxlan).
		fmt.Fprintln(o.Stdout, "\nNone of the BGP backend processes (BIRD or GoBGP) are running.")
		fmt.Fprintln(o.Stdout)
		return nil
	}
	for _, fam := range []struct {
		name string
		v6   bool
	}{{"IPv4", false}, {"IPv6", true}} {
		fmt.Fprintf(o.Stdout, "\n%s BGP status\n", fam.name)
		t := newBoxTable("PEER ADDRESS", "PEER TYPE", "STATE", "SINCE", "INFO")
		n := 0
		for _, p := range st.Peers {
			if p.Address.Is6() != fam.v6 {
				continue
			}
			n++
			state, info := "start", p.State
			if p.State == "Established" {
				state = "up"
			}
			if p.Info != "" && p.State != "Established" {
				info = p.State + " " + p.Info
			}
			since := ""
			if !p.Since.IsZero() {
				since = sinceText(p.Since)
			}
			t.add(p.Address.String(), p.Type, state, since, info)
		}
		if n == 0 {
			fmt.Fprintf(o.Stdout, "No %s peers found.\n", fam.name)
			continue
		}
		if err := t.write(o.Stdout); err != nil {
			return err
		}
	}
	fmt.Fprintln(o.Stdout)
	return nil
}

// sinceText is the time of day for today, the date otherwise (as BIRD shows it).
func sinceText(t time.Time) string {
	if time.Since(t) < 24*time.Hour {
		return t.Local().Format("15:04:05")
	}
	return t.Local().Format("2006-01-02")
}

func readNodeStatus(path string) (peering.NodeStatus, error) {
	var st peering.NodeStatus
	c, err := net.DialTimeout("unix", path, 2*time.Second)
	if err != nil {
		return st, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	err = json.NewDecoder(c).Decode(&st)
	return st, err
}
