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
	if len(seen) != 20 {
		t.Fatalf("20 picks gave only %d distinct ports", len(seen))
	}
}

// TestLoopbackNeverRepeats draws the port Loopback just handed out every
// time: although it is still free, it must not be handed out again (two
// servers started together would both bind it).
func TestLoopbackNeverRepeats(t *testing.T) {
	first, err := Loopback()
	if err != nil {
		t.Fatal(err)
	}
	same := func(int) int { return first - lowest }
	if second, err := loopback(ephemeralStart(), same); err == nil {
		t.Fatalf("port %d handed out twice (second pick %d)", first, second)
	}
}
