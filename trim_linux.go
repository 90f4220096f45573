package main

import (
	"bufio"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// startupTrimDelay is how long after start calico-node gives back the pages
// only start-up used: by then the agent is up and has synced.
const startupTrimDelay = 5 * time.Second

// trimAfterStartup releases, once, after delay, the pages of the binary's
// code and read-only data that start-up touched (package initialisation of
// the whole multi-call binary, the first sync) and the heap it no longer
// uses. The file pages stay in the page cache, so what the agent touches
// again comes back without I/O, one page at a time: the mappings are marked
// random-access, which stops the kernel from mapping 64 KB around every
// touched page. CALICO_KEEP_STARTUP_PAGES=true turns it off.
func trimAfterStartup(delay time.Duration) {
	if v, _ := strconv.ParseBool(os.Getenv("CALICO_KEEP_STARTUP_PAGES")); v {
		return
	}
	time.AfterFunc(delay, func() {
		n, err := releaseBinaryPages()
		debug.FreeOSMemory()
		if err != nil {
			slog.Warn("releasing start-up pages", "err", err)
			return
		}
		slog.Debug("released start-up pages", "bytes", n)
	})
}

// releaseBinaryPages drops this process's mappings of the pages of its
// executable's read-only segments (code, read-only data) and says how many
// bytes those segments span. Writable segments are never touched: dropping
// their private copies would lose data.
func releaseBinaryPages() (uint64, error) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return 0, err
	}
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var total uint64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		start, end, ok := readOnlyMappingOf(sc.Text(), exe)
		if !ok {
			continue
		}
		for _, advice := range []uintptr{syscall.MADV_RANDOM, syscall.MADV_DONTNEED} {
			if _, _, e := syscall.Syscall(syscall.SYS_MADVISE, start, end-start, advice); e != 0 {
				return total, fmt.Errorf("madvise %#x-%#x: %w", start, end, e)
			}
		}
		total += uint64(end - start)
	}
	return total, sc.Err()
}

// readOnlyMappingOf parses a /proc/self/maps line and returns its address
// range when it maps path without write permission.
func readOnlyMappingOf(line, path string) (start, end uintptr, ok bool) {
	fields := strings.Fields(line)
	if len(fields) < 6 || fields[5] != path || len(fields[1]) < 2 || fields[1][1] != '-' {
		return 0, 0, false
	}
	lo, hi, found := strings.Cut(fields[0], "-")
	if !found {
		return 0, 0, false
	}
	s, err1 := strconv.ParseUint(lo, 16, 64)
	e, err2 := strconv.ParseUint(hi, 16, 64)
	if err1 != nil || err2 != nil || e <= s {
		return 0, 0, false
	}
	return uintptr(s), uintptr(e), true
}
