package freeport

import (
	"net"
	"strconv"
	"testing"
)

func TestLoopbackBelowEphemeral(t *testing.T) {
	top := ephemeralStart()
	seen := map[int]bool{}
	for range 20 {
		p, err := Loopback()
		if err != nil {
			t.Fatal(err)
		}
		if p < lowest || p >= top {
			t.Fatalf("port %d outside %d-%d", p, lowest, top-1)
		}
		seen[p] = true
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			t.Fatalf("port %d not bindable after Loopback: %v", p, err)
		}
		l.Close()
	}
	if len(seen) < 10 {
		t.Fatalf("20 picks gave only %d distinct ports", len(seen))
	}
}

func TestParseRangeStart(t *testing.T) {
	if lo, err := parseRangeStart("32768\t60999\n"); err != nil || lo != 32768 {
		t.Fatalf("got %d, %v", lo, err)
	}
	if _, err := parseRangeStart("garbage"); err == nil {
		t.Fatal("garbage parsed")
	}
}
