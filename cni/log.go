package cni

import (
	"io"
	"log/slog"
	"os"
	"strings"

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

// logWriter is where the plugin logs, as Calico's does: stderr, and with
// log_file_path also that file, rotated at log_file_max_size MB, rotated
// files kept log_file_max_age days and at most log_file_max_count of them
// (the file is opened on the first line logged: a quiet call costs
// nothing).
func (c *NetConf) logWriter(stderr io.Writer) io.Writer {
	if c.LogFilePath == "" {
		return stderr
	}
	or := func(v, def int) int {
		if v > 0 {
			return v
		}
		return def
	}
	return io.MultiWriter(stderr, &lumberjack.Logger{Filename: c.LogFilePath,
		MaxSize: or(c.LogFileMaxSize, defaultLogMaxSizeMB), MaxAge: or(c.LogFileMaxAge, defaultLogMaxAgeDays),
		MaxBackups: or(c.LogFileMaxCount, defaultLogMaxCount)})
}

// configureLogging points the in-process plugin's log at the netconf's
// level and outputs. (In calico-node the agent's own log is used.)
func (c *NetConf) configureLogging() {
	slog.SetDefault(slog.New(slog.NewTextHandler(c.logWriter(os.Stderr), &slog.HandlerOptions{Level: c.logLevel()})))
}
