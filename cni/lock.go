package cni

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// fileLock is a node-wide exclusive lock on a file (flock), so that the
// same host's concurrent ADDs do not fight over one block.
type fileLock struct{ f *os.File }

func lockFile(path string) (*fileLock, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("lock dir: %w", err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening lock %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	return &fileLock{f: f}, nil
}

// unlock releases the lock; a second call does nothing.
func (l *fileLock) unlock() {
	if l != nil && l.f != nil {
		_ = syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
		_ = l.f.Close()
		l.f = nil
	}
}
