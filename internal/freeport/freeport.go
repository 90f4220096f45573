// Package freeport picks loopback TCP ports for servers that tests and the
// demo start on a shared machine.
//
// A port asked of the kernel with ":0" comes from the ephemeral range, the
// same range every outgoing connection takes its source port from: between
// closing the probe and the server's bind, another test's client may take it
// ("bind: address already in use"). Ports below that range are never handed
// out on their own, so only another explicit pick can collide with ours.
// Picks made by this process never repeat: two servers started together
// (an agent's health and metrics ports) cannot be handed the same port
// before either binds it.
package freeport

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

const (
	// lowest is the bottom of the range picked from, clear of the
	// well-known and registered services a host may run.
	lowest = 10000
	// defaultEphemeral is Linux's default first ephemeral port.
	defaultEphemeral = 32768
	attempts         = 64
)

// handed holds every port this process's Loopback has returned.
var handed struct {
	sync.Mutex
	ports map[int]bool
}

// Loopback returns a TCP port on 127.0.0.1 that was free when checked and
// lies below the kernel's ephemeral range and that this process has not
// been given before. It binds in the calling thread's network namespace.
func Loopback() (int, error) {
	return loopback(ephemeralStart(), rand.IntN)
}

// loopback is Loopback picking from lowest to top-1 with intn.
func loopback(top int, intn func(int) int) (int, error) {
	var last error
	handed.Lock()
	defer handed.Unlock()
	if handed.ports == nil {
		handed.ports = map[int]bool{}
	}
	for range attempts {
		port := lowest + intn(top-lowest)
		if handed.ports[port] {
			last = fmt.Errorf("port %d already handed out", port)
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			last = err
			continue
		}
		if err := l.Close(); err != nil {
			return 0, fmt.Errorf("closing the probe on port %d: %w", port, err)
		}
		handed.ports[port] = true
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
