package felix

import (
	"bytes"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/calico-aio/calico-aio/felix/calc"
	"github.com/calico-aio/calico-aio/felix/config"
	"github.com/calico-aio/calico-aio/felix/metrics"
)

// syslogServer is a unixgram socket standing in for /dev/log.
type syslogServer struct {
	t    *testing.T
	conn *net.UnixConn
}

func newSyslogServer(t *testing.T, path string) *syslogServer {
	t.Helper()
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return &syslogServer{t: t, conn: c}
}

// until reads messages up to the first containing sentinel and returns
// them (the sentinel's included).
func (s *syslogServer) until(sentinel string) []string {
	s.t.Helper()
	var got []string
	buf := make([]byte, 64<<10)
	for {
		_ = s.conn.SetReadDeadline(time.Now().Add(10 * time.Second)) // a bound on a hang, not a timing check
		n, err := s.conn.Read(buf)
		if err != nil {
			s.t.Fatalf("waiting for %q: %v (got %q)", sentinel, err, got)
		}
		got = append(got, string(buf[:n]))
		if strings.Contains(string(buf[:n]), sentinel) {
			return got
		}
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}
func (b *syncBuffer) String() string { b.mu.Lock(); defer b.mu.Unlock(); return b.b.String() }

// TestSettingsLogSyslogLive: logs reach the local syslog socket at
// logSeveritySys (Calico's default Info) with the level's syslog severity
// and Calico's tag; changing the field while the agent runs changes what
// is sent; FELIX_LOGSEVERITYSYS=none sends nothing; a missing socket gives
// one warning and no output, and a socket that appears later is used.
func TestSettingsLogSyslogLive(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "log")
	srv := newSyslogServer(t, sock)
	logs, h := config.NewLogOutputs(&syncBuffer{}, "", sock)
	log := slog.New(h)
	a := &agent{cfg: config.Config{NodeName: "n1"}, state: calc.NewState("n1"), overlay: calc.NewOverlay("n1"),
		metrics: metrics.New("n1", ""), settings: config.NewLoader("n1", spec{}), logs: logs}
	a.foldSettings()

	log.Debug("debug one")
	log.Info("info one", "k", "v")
	got := srv.until("info one")
	if len(got) != 1 || !strings.HasPrefix(got[0], "<14>") || !strings.Contains(got[0], " calico-felix[") ||
		!strings.Contains(got[0], "level=INFO msg=\"info one\" k=v") || strings.Contains(got[0], "time=") {
		t.Errorf("default Info: got %q, want only the info message, severity 6 (<14>), tagged calico-felix", got)
	}
	f := fc(t, "default", "logSeveritySys", `"Debug"`)
	a.fold(felixUpdate(f, false))
	log.With("part", "x").Debug("debug two")
	if got := srv.until("debug two"); len(got) != 1 || !strings.HasPrefix(got[0], "<15>") || !strings.Contains(got[0], "part=x") {
		t.Errorf("Debug: got %q", got)
	}
	f.Spec.LogSeveritySys = "Warning"
	a.fold(felixUpdate(f, false))
	log.Info("info three")
	log.Error("error three")
	if got := srv.until("error three"); len(got) != 1 || !strings.HasPrefix(got[0], "<11>") {
		t.Errorf("Warning: got %q, want only the error (<11>)", got)
	}

	// FELIX_LOGSEVERITYSYS=none: nothing, whatever the datastore says.
	env, err := config.ParseFelixEnv([]string{"FELIX_LOGSEVERITYSYS=none"})
	if err != nil {
		t.Fatal(err)
	}
	a.settings = config.NewLoader("n1", env)
	a.fold(felixUpdate(f, false))
	log.Error("error four")
	f.Spec.LogSeveritySys = "Info"
	a.settings = config.NewLoader("n1", spec{})
	a.fold(felixUpdate(f, false))
	log.Info("info five")
	if got := srv.until("info five"); len(got) != 1 {
		t.Errorf("none: got %q, want nothing before info five", got)
	}

	// No socket: one warning on the screen, nothing sent, no error.
	missing := filepath.Join(dir, "missing")
	screen := &syncBuffer{}
	logs2, h2 := config.NewLogOutputs(screen, "", missing)
	prev := slog.Default()
	slog.SetDefault(slog.New(h2))
	t.Cleanup(func() { slog.SetDefault(prev) })
	b := &agent{cfg: config.Config{NodeName: "n1"}, state: calc.NewState("n1"), overlay: calc.NewOverlay("n1"),
		metrics: metrics.New("n1", ""), settings: config.NewLoader("n1", spec{}), logs: logs2}
	b.foldSettings()
	b.fold(felixUpdate(fc(t, "default", "logSeverityScreen", `"Info"`), false))
	slog.Info("while missing")
	if n := strings.Count(screen.String(), "no syslog output"); n != 1 {
		t.Errorf("%d warnings about the missing socket, want 1:\n%s", n, screen.String())
	}
	late := newSyslogServer(t, missing) // the daemon starts
	slog.Info("after the daemon started")
	if got := late.until("after the daemon started"); len(got) != 1 {
		t.Errorf("late socket: got %q", got)
	}
}
