package cni

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"

	"gopkg.in/natefinch/lumberjack.v2"
)

// Calico's defaults for the plugin's log file rotation.
const (
	defaultLogMaxSizeMB  = 100
	defaultLogMaxAgeDays = 30
	defaultLogMaxCount   = 10
)

// logLevel is log_level as a slog level (Calico's default Info).
func (c *NetConf) logLevel() slog.Level {
	switch strings.ToLower(c.LogLevel) {
	case "debug":
		return slog.LevelDebug
	case "warning", "warn":
		return slog.LevelWarn
	case "error", "fatal", "panic":
		return slog.LevelError
	}
	return slog.LevelInfo
}

// logFile is log_file_path, rotated as Calico's plugin rotates it: at
// log_file_max_size MB, rotated files kept log_file_max_age days and at
// most log_file_max_count of them. Nil without log_file_path. The file
// is opened on the first line logged: a quiet call costs nothing.
func (c *NetConf) logFile() *lumberjack.Logger {
	if c.LogFilePath == "" {
		return nil
	}
	or := func(v, def int) int {
		if v > 0 {
			return v
		}
		return def
	}
	return &lumberjack.Logger{Filename: c.LogFilePath,
		MaxSize: or(c.LogFileMaxSize, defaultLogMaxSizeMB), MaxAge: or(c.LogFileMaxAge, defaultLogMaxAgeDays),
		MaxBackups: or(c.LogFileMaxCount, defaultLogMaxCount)}
}

// logWriter is where the plugin logs, as Calico's does: stderr, and the
// log file when there is one.
func (c *NetConf) logWriter(stderr io.Writer) io.Writer {
	if f := c.logFile(); f != nil {
		return io.MultiWriter(stderr, f)
	}
	return stderr
}

// configureLogging points the in-process plugin's log at the netconf's
// level and outputs (a short-lived process: the file closes at exit).
func (c *NetConf) configureLogging() {
	slog.SetDefault(slog.New(slog.NewTextHandler(c.logWriter(os.Stderr), &slog.HandlerOptions{Level: c.logLevel()})))
}

// servedLogs are the plugin log files of calls calico-node served, one
// writer per file and rotation settings, kept open (a lumberjack.Logger
// keeps a goroutine per writer, so one per call would leak).
type servedLogs struct {
	mu    sync.Mutex
	files map[string]*lumberjack.Logger
}

func (s *servedLogs) file(conf *NetConf) *lumberjack.Logger {
	f := conf.logFile()
	if f == nil {
		return nil
	}
	key := fmt.Sprint(f.Filename, f.MaxSize, f.MaxAge, f.MaxBackups)
	s.mu.Lock()
	defer s.mu.Unlock()
	if have, ok := s.files[key]; ok {
		return have
	}
	if s.files == nil {
		s.files = map[string]*lumberjack.Logger{}
	}
	s.files[key] = f
	return f
}

// logServed records a call calico-node served in the netconf's
// log_file_path, at its log_level (the call's own lines go to the
// agent's log), so that the file shows every call whichever path ran it.
func (s *servedLogs) logServed(stdin []byte, plugin, cmd, container string, err error) {
	conf, cerr := LoadNetConf(stdin)
	if cerr != nil {
		return
	}
	f := s.file(conf)
	if f == nil {
		return
	}
	l := slog.New(slog.NewTextHandler(f, &slog.HandlerOptions{Level: conf.logLevel()}))
	if err != nil {
		l.Error("CNI call served by calico-node failed", "plugin", plugin, "command", cmd, "container", container, "err", err)
		return
	}
	l.Info("CNI call served by calico-node", "plugin", plugin, "command", cmd, "container", container)
}
