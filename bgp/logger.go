package bgp

import (
	"context"
	"log/slog"
	"sort"
	"time"

	gobgplog "github.com/osrg/gobgp/v3/pkg/log"
)

// gobgpLogger adapts slog to GoBGP's logger. GoBGP's default logger exits the
// process on Fatal (e.g. for an invalid policy, GOBGP-NOTES trap 2) and panics
// on Panic; here both are logged as errors and the agent keeps running.
// Messages below min are dropped; the rest go to the handler even when its
// own level would drop them (min is the speaker's level, like BIRD's debug
// setting beside Felix's log level).
type gobgpLogger struct {
	l   *slog.Logger
	min *slog.LevelVar
}

func newGoBGPLogger(l *slog.Logger, min *slog.LevelVar) gobgpLogger {
	return gobgpLogger{l: l.With("lib", "gobgp"), min: min}
}

func (g gobgpLogger) Panic(msg string, f gobgplog.Fields) { g.emit(slog.LevelError, msg, f) }
func (g gobgpLogger) Fatal(msg string, f gobgplog.Fields) { g.emit(slog.LevelError, msg, f) }
func (g gobgpLogger) Error(msg string, f gobgplog.Fields) { g.emit(slog.LevelError, msg, f) }
func (g gobgpLogger) Warn(msg string, f gobgplog.Fields)  { g.emit(slog.LevelWarn, msg, f) }
func (g gobgpLogger) Info(msg string, f gobgplog.Fields)  { g.emit(slog.LevelInfo, msg, f) }
func (g gobgpLogger) Debug(msg string, f gobgplog.Fields) { g.emit(slog.LevelDebug, msg, f) }

// SetLevel is ignored: the slog handler decides.
func (g gobgpLogger) SetLevel(gobgplog.LogLevel) {}

// GetLevel lets GoBGP skip building debug messages when they would be dropped.
func (g gobgpLogger) GetLevel() gobgplog.LogLevel {
	if g.min.Level() <= slog.LevelDebug {
		return gobgplog.DebugLevel
	}
	return gobgplog.InfoLevel
}

func (g gobgpLogger) emit(level slog.Level, msg string, f gobgplog.Fields) {
	if level < g.min.Level() {
		return
	}
	keys := make([]string, 0, len(f))
	for k := range f {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	args := make([]any, 0, 2*len(keys))
	for _, k := range keys {
		args = append(args, k, f[k])
	}
	r := slog.NewRecord(time.Now(), level, msg, 0)
	r.Add(args...)
	_ = g.l.Handler().Handle(context.Background(), r)
}
