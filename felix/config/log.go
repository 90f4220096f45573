package config

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// Log severities: Calico's names onto slog levels. Trace is below Debug;
// Fatal logs what Error does (the agent never exits on a log call).
const levelTrace = slog.LevelDebug - 4

func slogLevel(severity string) slog.Level {
	switch severity {
	case "Trace":
		return levelTrace
	case "Debug":
		return slog.LevelDebug
	case "Warning":
		return slog.LevelWarn
	case "Error", "Fatal":
		return slog.LevelError
	}
	return slog.LevelInfo
}

// logLevelAlias maps the spellings the --log-level flag used to take
// ("warn", "panic") onto Calico's names; others pass unchanged.
func logLevelAlias(s string) string {
	switch strings.ToLower(s) {
	case "warn":
		return "Warning"
	case "panic", "critical":
		return "Fatal"
	}
	return s
}

// LogOutputs are the agent's log destinations: the screen (stderr) at
// logSeverityScreen, when logFilePath is set a file at logSeverityFile,
// and the local syslog socket at logSeveritySys (syslog.go). All
// change while the agent runs.
type LogOutputs struct {
	screen, file, sys *slog.LevelVar
	sink              *fileSink
	syslog            *syslogSink
}

// levelOff is above every level: the file is off.
const levelOff = slog.Level(1 << 20)

// InstallLogger makes the default logger write text to stderr at
// severity and to the file the settings name.
func InstallLogger(severity string) *LogOutputs {
	o, h := NewLogOutputs(os.Stderr, severity, defaultSyslogSocket)
	slog.SetDefault(slog.New(h))
	return o
}

// NewLogOutputs makes the outputs and the handler writing to them;
// syslogSocket is the local syslog socket ("": no syslog output).
func NewLogOutputs(screen io.Writer, severity, syslogSocket string) (*LogOutputs, slog.Handler) {
	o := &LogOutputs{screen: new(slog.LevelVar), file: new(slog.LevelVar), sys: new(slog.LevelVar),
		sink: &fileSink{}, syslog: &syslogSink{path: syslogSocket}}
	o.screen.Set(slogLevel(severity))
	o.file.Set(levelOff)
	o.sys.Set(levelOff)
	return o, slog.NewMultiHandler(
		slog.NewTextHandler(screen, &slog.HandlerOptions{Level: o.screen}),
		slog.NewTextHandler(o.sink, &slog.HandlerOptions{Level: o.file}),
		&syslogHandler{level: o.sys, sink: o.syslog})
}

// applySyslog sets the syslog level; a socket that cannot be reached is
// reported once (until it works again) and leaves the output silent.
func (o *LogOutputs) applySyslog(s *spec) {
	lvl := sysLevel(s.LogSeveritySys)
	if lvl == levelOff || o.syslog.path == "" {
		o.sys.Set(levelOff)
		o.syslog.close()
		return
	}
	err := o.syslog.open()
	o.sys.Set(lvl)
	o.syslog.mu.Lock()
	warn := err != nil && !o.syslog.warned
	o.syslog.warned = err != nil
	o.syslog.mu.Unlock()
	if warn {
		slog.Warn("no syslog output: the local syslog socket cannot be reached", "err", err)
	}
}

// Apply sets the levels and the file from the effective configuration.
// A file that cannot be opened is reported and the file output stays off.
func (o *LogOutputs) Apply(s *spec) {
	o.screen.Set(slogLevel(s.LogSeverityScreen))
	o.applySyslog(s)
	path := s.LogFilePath
	if strings.EqualFold(path, "none") {
		path = ""
	}
	if err := o.sink.open(path); err != nil {
		o.file.Set(levelOff)
		slog.Error("log file not opened; logging to the screen only", "logFilePath", path, "err", err)
		return
	}
	if path == "" {
		o.file.Set(levelOff)
		return
	}
	o.file.Set(slogLevel(s.LogSeverityFile))
}

// fileSink is the log file, replaceable while loggers write to it.
type fileSink struct {
	mu   sync.Mutex
	path string
	f    *os.File
}

func (w *fileSink) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f == nil {
		return len(p), nil
	}
	return w.f.Write(p)
}

// open switches to path ("" closes the file); the directory is created.
func (w *fileSink) open(path string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if path == w.path && (w.f != nil || path == "") {
		return nil
	}
	if w.f != nil {
		_ = w.f.Close()
		w.f, w.path = nil, ""
	}
	if path == "" {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("log directory: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("opening log file: %w", err)
	}
	w.f, w.path = f, path
	return nil
}
