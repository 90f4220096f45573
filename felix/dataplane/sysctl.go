package dataplane

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// setSysctl writes value to procSys/path unless it already holds it.
func setSysctl(procSys, path, value string) error {
	full := filepath.Join(procSys, path)
	if have, err := readSysctl(full); err == nil && string(have) == value {
		return nil
	}
	if err := os.WriteFile(full, []byte(value), 0o644); err != nil {
		return fmt.Errorf("sysctl %s=%s: %w", path, value, err)
	}
	return nil
}

// readSysctl reads a short /proc/sys value, trimmed, in three system
// calls (open, read, close) into a buffer on the stack: the interface
// refresh checks four per endpoint, and os.ReadFile adds a stat, a
// second read, a poller registration attempt and the garbage of an
// *os.File to each.
func readSysctl(full string) ([]byte, error) {
	fd, err := unix.Open(full, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: full, Err: err}
	}
	defer unix.Close(fd)
	var buf [64]byte
	n, err := unix.Read(fd, buf[:])
	for errors.Is(err, unix.EINTR) {
		n, err = unix.Read(fd, buf[:])
	}
	if err != nil {
		return nil, &os.PathError{Op: "read", Path: full, Err: err}
	}
	if n == len(buf) {
		return nil, fmt.Errorf("%s: longer than a sysctl value", full)
	}
	return bytes.TrimSpace(buf[:n]), nil
}
