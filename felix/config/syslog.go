package config

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"time"
)

// defaultSyslogSocket is the local syslog socket Calico's Felix logs to.
const defaultSyslogSocket = "/dev/log"

// syslogTag is the program name in each syslog message, as Calico's.
const syslogTag = "calico-felix"

// sysLevel is the slog level of logSeveritySys: None (any case) turns the
// syslog output off.
func sysLevel(severity string) slog.Level {
	if strings.EqualFold(severity, "none") {
		return levelOff
	}
	return slogLevel(severity)
}

// syslogSink sends messages to the local syslog daemon's datagram socket.
// A missing socket means no syslog output; it is reported once (open) and
// tried again on later messages, so a daemon started later is found.
type syslogSink struct {
	mu     sync.Mutex
	path   string // "" : never log to syslog (tests)
	conn   net.Conn
	warned bool
}

// open connects when not connected; the error says why it cannot.
func (s *syslogSink) open() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dialLocked()
}

func (s *syslogSink) dialLocked() error {
	if s.conn != nil || s.path == "" {
		return nil
	}
	// Most nodes' calico-node has no syslog socket: one stat per message
	// costs a fraction of a failed dial (socket, connect, close).
	if _, err := os.Stat(s.path); err != nil {
		return fmt.Errorf("syslog socket %s: %w", s.path, err)
	}
	c, err := net.Dial("unixgram", s.path)
	if err != nil {
		return fmt.Errorf("syslog socket %s: %w", s.path, err)
	}
	s.conn = c
	return nil
}

// close drops the connection (the output was turned off).
func (s *syslogSink) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn != nil {
		_ = s.conn.Close()
		s.conn = nil
	}
}

// send writes one message with syslog severity sev (RFC 3164 framing,
// facility user). A failed write drops the connection; the next message
// dials again.
func (s *syslogSink) send(sev int, msg []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dialLocked() != nil || s.conn == nil {
		return
	}
	line := fmt.Appendf(nil, "<%d>%s %s[%d]: %s", 8+sev, time.Now().Format(time.Stamp), syslogTag, os.Getpid(), msg)
	if _, err := s.conn.Write(line); err != nil {
		_ = s.conn.Close()
		s.conn = nil
	}
}

// syslogSeverity maps a slog level onto syslog's severities.
func syslogSeverity(l slog.Level) int {
	switch {
	case l >= slog.LevelError:
		return 3 // err
	case l >= slog.LevelWarn:
		return 4 // warning
	case l >= slog.LevelInfo:
		return 6 // info
	}
	return 7 // debug
}

// syslogHandler formats records as the text handler does (without the
// time: syslog stamps it) and sends each with its level's severity.
type syslogHandler struct {
	level slog.Leveler
	sink  *syslogSink
	// wrap re-applies WithAttrs/WithGroup to the per-record text handler.
	wrap func(slog.Handler) slog.Handler
}

func (h *syslogHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level.Level() }

func (h *syslogHandler) Handle(ctx context.Context, r slog.Record) error {
	var buf bytes.Buffer
	var th slog.Handler = slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.Level(-1 << 20),
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		}})
	if h.wrap != nil {
		th = h.wrap(th)
	}
	if err := th.Handle(ctx, r); err != nil {
		return err
	}
	h.sink.send(syslogSeverity(r.Level), bytes.TrimRight(buf.Bytes(), "\n"))
	return nil
}

func (h *syslogHandler) with(f func(slog.Handler) slog.Handler) *syslogHandler {
	prev := h.wrap
	return &syslogHandler{level: h.level, sink: h.sink, wrap: func(x slog.Handler) slog.Handler {
		if prev != nil {
			x = prev(x)
		}
		return f(x)
	}}
}

func (h *syslogHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return h.with(func(x slog.Handler) slog.Handler { return x.WithAttrs(as) })
}

func (h *syslogHandler) WithGroup(name string) slog.Handler {
	return h.with(func(x slog.Handler) slog.Handler { return x.WithGroup(name) })
}
