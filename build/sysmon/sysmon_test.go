package sysmon

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// TestRelax: the thread found is one of this process's, it gets the slack,
// and a second search (another busy stretch) finds the same thread.
func TestRelax(t *testing.T) {
	if os.Geteuid() != 0 && os.Getenv("CI") != "true" {
		t.Skip("setting another thread's timer slack needs CAP_SYS_NICE")
	}
	tid, err := Relax(3 * time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(fmt.Sprintf("/proc/self/task/%d", tid)); err != nil {
		t.Fatalf("thread %d is not this process's: %v", tid, err)
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/timerslack_ns", tid))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(b)); got != "3000000" {
		t.Errorf("thread %d's timer slack is %s ns, want 3000000", tid, got)
	}
	again, err := find()
	if err != nil {
		t.Fatal(err)
	}
	if again != tid {
		t.Errorf("a second search found thread %d, the first %d", again, tid)
	}
	if tid == os.Getpid() {
		t.Errorf("found the main thread %d, which the runtime's monitor never is", tid)
	}
}

// TestMostSeen: a clear majority wins; a tie or too few sightings is no
// answer.
func TestMostSeen(t *testing.T) {
	for _, c := range []struct {
		hits map[int]int
		want int
	}{
		{map[int]int{10: samples, 11: 2}, 10},
		{map[int]int{10: samples / 4}, 10},
		{map[int]int{10: samples/4 - 1}, 0},
		{map[int]int{10: 20, 11: 20}, 0},
		{map[int]int{}, 0},
	} {
		got, err := mostSeen(c.hits)
		if c.want == 0 {
			if !errors.Is(err, ErrNotFound) {
				t.Errorf("%v: got %d, %v; want ErrNotFound", c.hits, got, err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%v: got %d, %v; want %d", c.hits, got, err, c.want)
		}
	}
}
