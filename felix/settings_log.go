package felix

import (
	"log/slog"
	"os"
	"strings"
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

// installLogger makes the default logger write text to stderr at a level
// logSeverityScreen can change while the agent runs.
func installLogger(severity string) *slog.LevelVar {
	lv := new(slog.LevelVar)
	lv.Set(slogLevel(severity))
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lv})))
	return lv
}
