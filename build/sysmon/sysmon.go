// Package sysmon gives the Go runtime's system monitor thread of a
// long-running process a timer slack, so that its polls coalesce.
//
// The monitor (runtime.sysmon, one thread per process) sleeps 20 µs
// between polls for the first millisecond of every stretch in which a P is
// busy or in a syscall, then doubles its sleep up to 10 ms, and sleeps
// until woken once every P is idle. A CNI call served by the agent is many
// short stretches (each etcd round trip, each netlink request), and on
// this project's VMs each sleep and wake of a thread costs 17-19 µs of CPU
// (docs/PERFORMANCE.md, eleventh pass): the monitor alone was about 1 ms of
// the agent's CPU per call. With a timer slack the kernel may end each of
// its sleeps up to the slack later, so the 20 µs polls come about as often
// as the slack allows. The monitor's duties that a later poll delays (taking
// back a P blocked in a syscall when work waits for it, preempting a
// goroutine that ran 10 ms, polling the network after 10 ms without a
// poll) tolerate the delay: the runtime itself sleeps up to 10 ms between
// polls when nothing changes.
package sysmon

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// Slack is the timer slack the agent gives the monitor.
const Slack = 2 * time.Millisecond

// ErrNotFound: no thread of the process was seen sleeping as the monitor
// does while a goroutine kept a P busy.
var ErrNotFound = errors.New("the runtime's monitor thread was not found")

// Relax finds the monitor thread and sets its timer slack
// (/proc/<tid>/timerslack_ns, which needs CAP_SYS_NICE for a thread other
// than the caller's), and returns the thread's id. It spins one goroutine
// for a few milliseconds: while a P is busy the monitor sleeps in
// nanosleep(2) between its polls, which no other thread of the runtime
// does for more than a few microseconds, so the thread found there most
// often over the samples is the monitor.
func Relax(slack time.Duration) (int, error) {
	tid, err := find()
	if err != nil {
		return 0, err
	}
	path := fmt.Sprintf("/proc/%d/timerslack_ns", tid)
	if err := os.WriteFile(path, []byte(strconv.FormatInt(slack.Nanoseconds(), 10)), 0); err != nil {
		return 0, fmt.Errorf("setting the runtime monitor's timer slack: %w", err)
	}
	return tid, nil
}

// samples is how many times every thread's syscall is read.
const samples = 40

// find samples every thread's current syscall while a goroutine spins.
func find() (int, error) {
	stop := make(chan struct{})
	spun := make(chan struct{})
	go func() {
		defer close(spun)
		for {
			select {
			case <-stop:
				return
			default:
			}
			// Busy, but yielding: with one P the sampler must run too.
			runtime.Gosched()
		}
	}()
	defer func() { close(stop); <-spun }()
	want := []byte(strconv.Itoa(unix.SYS_NANOSLEEP) + " ")
	hits := map[int]int{}
	for range samples {
		tasks, err := os.ReadDir("/proc/self/task")
		if err != nil {
			return 0, fmt.Errorf("listing the process's threads: %w", err)
		}
		for _, t := range tasks {
			b, err := os.ReadFile("/proc/self/task/" + t.Name() + "/syscall")
			if err != nil || !bytes.HasPrefix(b, want) {
				continue
			}
			if tid, err := strconv.Atoi(t.Name()); err == nil {
				hits[tid]++
			}
		}
		time.Sleep(100 * time.Microsecond)
	}
	return mostSeen(hits)
}

// mostSeen is the thread seen most often, if it was seen in at least a
// quarter of the samples and more often than any other.
func mostSeen(hits map[int]int) (int, error) {
	best, n, tie := 0, 0, false
	for tid, h := range hits {
		switch {
		case h > n:
			best, n, tie = tid, h, false
		case h == n:
			tie = true
		}
	}
	if n < samples/4 || tie {
		return 0, fmt.Errorf("%w (nanosleep seen per thread: %v)", ErrNotFound, hits)
	}
	return best, nil
}
