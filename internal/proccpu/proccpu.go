// Package proccpu reads the CPU a process tree has used from /proc, for
// benchmarks that count what the processes they drive cost: their own
// time, what their reaped children used, and what their live descendants
// (long-lived helpers such as iptables-restore sessions) have used so far.
// /proc counts in clock ticks of 10 ms, so only sums over many operations
// mean much.
package proccpu

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

const tick = 10 * time.Millisecond

// Tree is the CPU of pid and of everything it started: its utime + stime
// plus Descendants.
func Tree(pid int) (time.Duration, error) {
	f, err := stat(pid)
	if err != nil {
		return 0, err
	}
	d, err := Descendants(pid)
	return ticks(f, 11, 12) + d, err
}

// Descendants is the CPU of what pid started: its waited-for children
// (cutime + cstime) and its live descendants' Tree. A child that exits
// and is reaped between two reads moves from the second term to the
// first, so the sum stays whole.
func Descendants(pid int) (time.Duration, error) {
	f, err := stat(pid)
	if err != nil {
		return 0, err
	}
	cpu := ticks(f, 13, 14)
	for _, kid := range Children(pid) {
		if n, err := Tree(kid); err == nil { // gone meanwhile: counted once reaped
			cpu += n
		}
	}
	return cpu, nil
}

// Children are pid's live child processes, from every thread's
// /proc/<pid>/task/<tid>/children.
func Children(pid int) []int {
	var out []int
	tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	for _, task := range tasks {
		kids, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", pid, task.Name()))
		for _, k := range strings.Fields(string(kids)) {
			if kid, err := strconv.Atoi(k); err == nil {
				out = append(out, kid)
			}
		}
	}
	return out
}

// stat is /proc/<pid>/stat's fields after the command name (field 3 of
// stat(5) is index 0).
func stat(pid int) ([]string, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, err
	}
	s := string(data)
	end := strings.LastIndexByte(s, ')')
	if end < 0 || end+2 > len(s) {
		return nil, fmt.Errorf("/proc/%d/stat: no command name in %q", pid, s)
	}
	f := strings.Fields(s[end+2:])
	if len(f) < 15 {
		return nil, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	return f, nil
}

// ticks sums the fields at is (clock ticks) as a duration.
func ticks(f []string, is ...int) time.Duration {
	var n int64
	for _, i := range is {
		v, _ := strconv.ParseInt(f[i], 10, 64)
		n += v
	}
	return time.Duration(n) * tick
}

// Self is the calling process's own CPU (user + system, every thread) from
// getrusage, in microseconds rather than ticks.
func Self() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, fmt.Errorf("getrusage: %w", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}

// MustSelf is Self for a test or benchmark, failing it on an error.
func MustSelf(tb testing.TB) time.Duration {
	tb.Helper()
	cpu, err := Self()
	if err != nil {
		tb.Fatal(err)
	}
	return cpu
}
