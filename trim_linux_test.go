package main

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"
)

func TestReadOnlyMappingOf(t *testing.T) {
	const exe = "/opt/cni/bin/calico-aio"
	cases := []struct {
		line       string
		start, end uintptr
		ok         bool
	}{
		{"00400000-0148f000 r-xp 00000000 fe:00 9978038    /opt/cni/bin/calico-aio", 0x400000, 0x148f000, true},
		{"0148f000-0278b000 r--p 0108f000 fe:00 9978038    /opt/cni/bin/calico-aio", 0x148f000, 0x278b000, true},
		{"0278b000-02831000 rw-p 0238b000 fe:00 9978038    /opt/cni/bin/calico-aio", 0, 0, false}, // writable: never
		{"c000000000-c004000000 rw-p 00000000 00:00 0", 0, 0, false},
		{"7f00-8f00 r-xp 00000000 fe:00 1    /usr/lib/other", 0, 0, false},
		{"zz-8f00 r-xp 00000000 fe:00 1    /opt/cni/bin/calico-aio", 0, 0, false},
		{"9000-8f00 r-xp 00000000 fe:00 1    /opt/cni/bin/calico-aio", 0, 0, false},
	}
	for _, c := range cases {
		s, e, ok := readOnlyMappingOf(c.line, exe)
		if s != c.start || e != c.end || ok != c.ok {
			t.Errorf("%q: got %#x-%#x %v, want %#x-%#x %v", c.line, s, e, ok, c.start, c.end, c.ok)
		}
	}
}

// The test binary releases its own code and read-only data pages and keeps
// running: its resident share of them drops.
func TestReleaseBinaryPages(t *testing.T) {
	before := exeRss(t)
	n, err := releaseBinaryPages()
	if err != nil {
		t.Fatal(err)
	}
	after := exeRss(t)
	t.Logf("read-only segments %d KB; resident %d KB -> %d KB", n>>10, before, after)
	if n == 0 {
		t.Fatal("found no read-only mapping of the executable")
	}
	if after >= before {
		t.Errorf("resident pages of the binary did not drop: %d KB -> %d KB", before, after)
	}
}

// exeRss sums the Rss (KB) of the executable's read-only mappings.
func exeRss(t *testing.T) int {
	t.Helper()
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	total, in := 0, false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if fields := strings.Fields(line); len(fields) > 1 && strings.Contains(fields[0], "-") && !strings.HasSuffix(fields[0], ":") {
			_, _, in = readOnlyMappingOf(line, exe)
			continue
		}
		if in && strings.HasPrefix(line, "Rss:") {
			kb, _ := strconv.Atoi(strings.Fields(line)[1])
			total += kb
		}
	}
	return total
}
