package iptables

import (
	"bytes"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
)

// in runs f on a goroutine locked into namespace n; commands f execs run there.
func in[T any](t testing.TB, n ns.NetNS, f func() (T, error)) T {
	t.Helper()
	var v T
	err := n.Do(func(ns.NetNS) error {
		var err error
		v, err = f()
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// applyIn runs tb.Apply inside namespace n.
func applyIn(t testing.TB, n ns.NetNS, tb *Table) ApplyStats {
	t.Helper()
	return in(t, n, tb.Apply)
}

// sh runs a command inside namespace n and returns its output.
func sh(t testing.TB, n ns.NetNS, name string, args ...string) string {
	t.Helper()
	return in(t, n, func() (string, error) {
		var b bytes.Buffer
		cmd := exec.Command(name, args...)
		cmd.Stdout, cmd.Stderr = &b, &b
		if err := cmd.Run(); err != nil {
			return "", fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, b.String())
		}
		return b.String(), nil
	})
}

// saved returns the chain declarations and rules of one table, as
// iptables-save prints them (comments, header and COMMIT dropped).
func saved(t testing.TB, n ns.NetNS, cmd, table string) string {
	t.Helper()
	var keep []string
	for _, l := range strings.Split(sh(t, n, cmd, "-t", table), "\n") {
		if f := strings.Fields(l); strings.HasPrefix(l, ":") && len(f) >= 2 {
			keep = append(keep, f[0]+" "+f[1]) // without counters
		} else if strings.HasPrefix(l, "-A ") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}
