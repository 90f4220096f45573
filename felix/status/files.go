package status

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/calico-aio/calico-aio/internal/epstatus"
	"github.com/calico-aio/calico-aio/store/api"
)

// Files keeps <prefix>/endpoint-status holding, as Calico's Felix
// does, one empty file per local workload endpoint whose policy the last
// successful apply programmed (named by internal/epstatus), and nothing
// else: the CNI plugin's policy_setup_timeout_seconds waits for the file
// before ADD returns. Set records; Sync does the I/O: it writes and
// removes the difference from what the directory held after the last
// sync, and reads the directory back only on the first sync, after a
// failure or after Resync (the agent's interface refresh), so files others
// removed or left are repaired then, and a pod's event costs no listing of
// every pod's file.
type Files struct {
	dir     string          // <prefix>/endpoint-status; "" when off
	want    map[string]bool // file names
	have    map[string]bool // what dir holds; nil: read it back
	retired []string        // earlier dirs whose files are still to go
}

// Resync makes the next Sync read the directory back.
func (f *Files) Resync() { f.have = nil }

// FilesPrefix is the effective endpointStatusPathPrefix: unset is the
// agent's run directory (Calico's default /var/run/calico is the run
// directory's default), "" and "none" turn the files off.
func FilesPrefix(s *api.FelixConfigurationSpec, runDir string) string {
	switch p := s.EndpointStatusPathPrefix; {
	case p == nil:
		return runDir
	case *p == "" || strings.EqualFold(*p, "none"):
		return ""
	default:
		return *p
	}
}

// Configure points the files at prefix ("" for none); the next sync
// removes what an earlier prefix held.
func (f *Files) Configure(prefix string) {
	dir := ""
	if prefix != "" {
		dir = filepath.Join(prefix, epstatus.Dir)
	}
	if dir == f.dir {
		return
	}
	if f.dir != "" {
		f.retired = append(f.retired, f.dir)
	}
	f.dir, f.have = dir, nil
}

// Set records the status file names of the programmed local endpoints.
func (f *Files) Set(names map[string]bool) { f.want = names }

// Sync makes the directory hold exactly the wanted files; what fails is
// done again by the next sync.
func (f *Files) Sync() error {
	var errs []error
	for i := 0; i < len(f.retired); i++ {
		if err := removeStatusFiles(f.retired[i]); err != nil {
			errs = append(errs, err)
			continue
		}
		f.retired = append(f.retired[:i], f.retired[i+1:]...)
		i--
	}
	if f.dir == "" {
		return errors.Join(errs...)
	}
	if f.have == nil {
		have, err := readStatusDir(f.dir)
		if err != nil {
			return errors.Join(append(errs, err)...)
		}
		f.have = have
	}
	failed := false
	for name := range f.want {
		if f.have[name] {
			continue
		}
		if err := os.WriteFile(filepath.Join(f.dir, name), nil, 0o644); err != nil {
			errs, failed = append(errs, fmt.Errorf("writing endpoint status file: %w", err)), true
			continue
		}
		f.have[name] = true
	}
	for name := range f.have {
		if f.want[name] {
			continue
		}
		if err := os.Remove(filepath.Join(f.dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs, failed = append(errs, fmt.Errorf("removing endpoint status file: %w", err)), true
			continue
		}
		delete(f.have, name)
	}
	if failed {
		f.have = nil
	}
	return errors.Join(errs...)
}

// readStatusDir lists dir, creating it when missing.
func readStatusDir(dir string) (map[string]bool, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("endpoint status directory: %w", err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("reading endpoint status directory: %w", err)
	}
	have := make(map[string]bool, len(entries))
	for _, e := range entries {
		if !e.IsDir() {
			have[e.Name()] = true
		}
	}
	return have, nil
}

// removeStatusFiles empties a retired status directory.
func removeStatusFiles(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading old endpoint status directory: %w", err)
	}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("removing old endpoint status file: %w", err)
		}
	}
	return nil
}
