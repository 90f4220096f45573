package config

import (
	"fmt"
	"path/filepath"
	"strings"
)

// parseStatusPrefix reads endpointStatusPathPrefix: an absolute
// directory, or none / "" for no status files.
func parseStatusPrefix(s string) (*string, error) {
	off := ""
	if s == "" || strings.EqualFold(s, "none") {
		return &off, nil
	}
	if !filepath.IsAbs(s) {
		return nil, fmt.Errorf("%q must be an absolute directory path or none", s)
	}
	c := filepath.Clean(s)
	return &c, nil
}

func validStatusPrefix(s *string) error { _, err := parseStatusPrefix(*s); return err }
