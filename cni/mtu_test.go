package cni

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The netconf's mtu wins; else <lib>/mtu as calico-node wrote it; else
// 1500. A file that holds no MTU fails the ADD, as in Calico.
func TestPodMTU(t *testing.T) {
	dir := t.TempDir()
	c := &NetConf{LibDir: dir}
	if m, err := c.PodMTU(); err != nil || m != 1500 {
		t.Errorf("no file: %d, %v; want 1500", m, err)
	}
	write := func(s string) {
		if err := os.WriteFile(filepath.Join(dir, "mtu"), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("1430\n")
	if m, err := c.PodMTU(); err != nil || m != 1430 {
		t.Errorf("file 1430: %d, %v", m, err)
	}
	if m, err := (&NetConf{LibDir: dir, MTU: 9000}).PodMTU(); err != nil || m != 9000 {
		t.Errorf("netconf mtu 9000: %d, %v", m, err)
	}
	for _, bad := range []string{"big", "20", ""} {
		write(bad)
		if _, err := c.PodMTU(); err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "mtu")) {
			t.Errorf("file %q: %v, want an error naming the file", bad, err)
		}
		if m := c.EffectiveMTU(); m != 1500 {
			t.Errorf("EffectiveMTU with file %q: %d", bad, m)
		}
	}
}
