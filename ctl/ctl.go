// Package ctl is calicoctl: resource commands, IPAM and node status, and the
// classic container and profile verbs.
package ctl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/spf13/pflag"

	"github.com/calico-aio/calico-aio/store"
	"github.com/calico-aio/calico-aio/store/apiconfig"
)

// IO is what a command reads and writes.
type IO struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	Getenv func(string) string
}

type command struct {
	summary string
	run     func(io IO, args []string) error
}

var commands map[string]command

func init() {
	commands = map[string]command{
		"create":    {"Create resources from a file", func(o IO, a []string) error { return runWrite(o, opCreate, a) }},
		"apply":     {"Create or replace resources from a file", func(o IO, a []string) error { return runWrite(o, opApply, a) }},
		"replace":   {"Replace existing resources from a file", func(o IO, a []string) error { return runWrite(o, opReplace, a) }},
		"delete":    {"Delete resources by file or by kind and name", func(o IO, a []string) error { return runWrite(o, opDelete, a) }},
		"get":       {"Show resources", runGet},
		"patch":     {"Patch a pre-existing resource in place", runPatch},
		"label":     {"Add, update or remove labels of resources", runLabel},
		"validate":  {"Validate resource files offline", runValidate},
		"node":      {"Show the status of the local calico-node (node status)", runNode},
		"ipam":      {"IP address management: show, check, release, configure", runIPAM},
		"version":   {"Show the client's and the cluster's version", runVersion},
		"container": {"Attach containers and network namespaces to Calico (classic verbs)", runContainer},
		"profile":   {"Add, remove and show profiles and their rules (classic verbs)", runProfile},
		"endpoint":  {"Show workload endpoints (classic endpoint show)", runEndpoint},
		"datastore": {"Migrate the contents of an etcdv3 datastore to a Kubernetes datastore", runDatastore},
	}
}

// exitError carries an exit code with an already-printed message.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit %d", e.code) }

// Main runs calicoctl with args (without the program name) and returns the
// exit code.
func Main(args []string, o IO) int {
	args = hoistGlobalFlags(args)
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(o.Stdout)
		if len(args) == 0 {
			return 1
		}
		return 0
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(o.Stderr, "calicoctl: unknown command %q\n", args[0])
		usage(o.Stderr)
		return 1
	}
	err := cmd.run(o, args[1:])
	var ee exitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.code
	case errors.Is(err, pflag.ErrHelp):
		return 0
	}
	fmt.Fprintln(o.Stderr, err)
	return 1
}

// valueFlags are the global flags that take a separate value.
var valueFlags = map[string]bool{"-c": true, "--config": true, "--etcd-endpoints": true, "--etcd-ca-cert-file": true,
	"--etcd-cert-file": true, "--etcd-key-file": true, "--timeout": true}

// hoistGlobalFlags moves global flags given before the command behind it, so
// "calicoctl --etcd-endpoints X get nodes" works like "calicoctl get nodes --etcd-endpoints X".
func hoistGlobalFlags(args []string) []string {
	i := 0
	for i < len(args) && strings.HasPrefix(args[i], "-") && args[i] != "-h" && args[i] != "--help" {
		if valueFlags[args[i]] && i+1 < len(args) {
			i++
		}
		i++
	}
	if i == 0 || i >= len(args) {
		return args
	}
	out := append([]string{args[i]}, args[i+1:]...)
	return append(out, args[:i]...)
}

func usage(w io.Writer) {
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Fprintln(w, "Usage:\n  calicoctl <command> [<args>...]\n\nCommands:")
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, commands[n].summary)
	}
}

func newFlagSet(name string, o IO) *pflag.FlagSet {
	fs := pflag.NewFlagSet("calicoctl "+name, pflag.ContinueOnError)
	fs.SetOutput(o.Stderr)
	fs.SetInterspersed(true)
	return fs
}

// connect opens the datastore described by the config file or the
// environment and the flags.
func connect(ctx context.Context, d *datastoreFlags, o IO) (*store.Client, error) {
	return connectFor("", d, o)
}

// connectFor is connect for a verb that etcdOnly may refuse (verb "": any
// datastore).
func connectFor(verb string, d *datastoreFlags, o IO) (*store.Client, error) {
	cfg, err := d.datastore(o.Getenv)
	if err != nil {
		return nil, err
	}
	if verb != "" {
		if err := etcdOnly(verb, cfg); err != nil {
			return nil, err
		}
	}
	c, err := apiconfig.Open(cfg, apiconfig.OSHost())
	switch {
	case err != nil && cfg.Type == apiconfig.Kubernetes:
		return nil, fmt.Errorf("cannot connect to the Kubernetes datastore: %w", err)
	case err != nil:
		return nil, fmt.Errorf("cannot connect to the datastore at %s: %w", strings.Join(cfg.Etcd.Endpoints, ","), err)
	}
	return c, nil
}

// datastoreError rewords an unreachable-datastore error so the user sees where.
func datastoreError(c *store.Client, err error) error {
	if errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "connection refused") {
		return fmt.Errorf("cannot reach the datastore (%v); check --etcd-endpoints, ETCD_ENDPOINTS or %s", err, apiconfig.DefaultConfigPath)
	}
	return err
}
