package dataplane

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// readSysctl returns the value trimmed as os.ReadFile would give it, and
// setSysctl writes only what differs.
func TestSetSysctlWritesOnlyWhatDiffers(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "net", "ipv4", "conf", "cali1", "proxy_arp")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("1\n"), 0o444); err != nil { // read-only: a write fails
		t.Fatal(err)
	}
	if err := setSysctl(dir, "net/ipv4/conf/cali1/proxy_arp", "1"); err != nil {
		t.Fatalf("same value: %v (it wrote)", err)
	}
	if os.Geteuid() != 0 { // root writes a read-only file
		if err := setSysctl(dir, "net/ipv4/conf/cali1/proxy_arp", "0"); err == nil {
			t.Fatal("a different value was not written")
		}
	}
	if err := os.Chmod(p, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := setSysctl(dir, "net/ipv4/conf/cali1/proxy_arp", "0"); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != "0" {
		t.Fatalf("after the write the file holds %q", b)
	}
	if _, err := readSysctl(filepath.Join(dir, "missing")); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("a missing file: %v", err)
	}
	if err := os.WriteFile(p, []byte(strings.Repeat("9", 100)), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readSysctl(p); err == nil {
		t.Fatal("a value longer than the buffer was read as a sysctl")
	}
}

// BenchmarkSysctlCheck: one unchanged sysctl checked, as the interface
// refresh does four times per endpoint; "osReadFile" is the way before.
// Reads only (the host's loopback forwarding flag).
func BenchmarkSysctlCheck(b *testing.B) {
	const p = "/proc/sys/net/ipv4/conf/lo/forwarding"
	b.Run("readSysctl", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := readSysctl(p); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("osReadFile", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := os.ReadFile(p); err != nil {
				b.Fatal(err)
			}
		}
	})
}
