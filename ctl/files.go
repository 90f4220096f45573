package ctl

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// errNoResources is what a file without any resource gives (--skip-empty
// passes over it).
var errNoResources = errors.New("no resources in input")

// inputFiles expands -f: "-" is stdin, a file is itself, a directory is
// its .json, .yaml and .yml files in name order (with -R, those of every
// subdirectory too), as calicoctl does.
func inputFiles(name string, recursive bool) ([]string, error) {
	if name == "-" {
		return []string{"-"}, nil
	}
	st, err := os.Stat(name)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", name, err)
	}
	if !st.IsDir() {
		return []string{name}, nil
	}
	var out []string
	err = filepath.WalkDir(name, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != name && !recursive {
				return filepath.SkipDir
			}
			return nil
		}
		switch strings.ToLower(filepath.Ext(p)) {
		case ".json", ".yaml", ".yml":
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading directory %s: %w", name, err)
	}
	sort.Strings(out)
	return out, nil
}
