// Package freeport picks loopback TCP ports for servers that tests and the
// demo start on a shared machine.
//
// A port asked of the kernel with ":0" comes from the ephemeral range, the
// same range every outgoing connection takes its source port from: between
// closing the probe and the server's bind, another test's client may take it
// ("bind: address already in use"). Ports below that range are never handed
// out on their own, so only another explicit pick can collide with ours.
package freeport

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

const (
	// lowest is the bottom of the range picked from, clear of the
	// well-known and registered services a host may run.
	lowest = 10000
	// defaultEphemeral is Linux's default first ephemeral port.
	defaultEphemeral = 32768
	attempts         = 64
)

// Loopback returns a TCP port on 127.0.0.1 that was free when checked and
// lies below the kernel's ephemeral range. It binds in the calling thread's
// network namespace.
func Loopback() (int, error) {
	top := ephemeralStart()
	var last error
	for range attempts {
		port := lowest + rand.IntN(top-lowest)
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			last = err
			continue
		}
		if err := l.Close(); err != nil {
			return 0, fmt.Errorf("closing the probe on port %d: %w", port, err)
		}
		return port, nil
	}
	return 0, fmt.Errorf("no free loopback port in %d-%d after %d tries: %w", lowest, top-1, attempts, last)
}

// ephemeralStart is the first port of the kernel's ephemeral range, or
// Linux's default when it cannot be read or leaves too little below it.
func ephemeralStart() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return defaultEphemeral
	}
	lo, err := parseRangeStart(string(b))
	if err != nil || lo < lowest+1024 {
		return defaultEphemeral
	}
	return lo
}

func parseRangeStart(s string) (int, error) {
	f := strings.Fields(s)
	if len(f) != 2 {
		return 0, errors.New("ip_local_port_range: want two numbers")
	}
	return strconv.Atoi(f[0])
}
