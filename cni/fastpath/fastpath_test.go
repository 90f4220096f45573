package fastpath

import (
	"net"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// An agent that accepts the call and never answers makes Forward give up
// after replyTimeout (the plugin then runs in-process), and a missing
// socket fails at once.
func TestForwardGivesUpOnASilentAgent(t *testing.T) {
	path := filepath.Join(t.TempDir(), SocketName)
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	held := make(chan net.Conn, 1)
	go func() {
		c, err := l.Accept()
		if err == nil {
			held <- c // read nothing, answer nothing
		}
	}()
	old := replyTimeout
	replyTimeout = syscall.Timeval{Usec: 200_000}
	defer func() { replyTimeout = old }()

	done := make(chan bool, 1)
	go func() {
		_, ok := Forward(path, Request{Plugin: "calico", Stdin: []byte(`{}`)})
		done <- ok
	}()
	select {
	case ok := <-done:
		if ok {
			t.Fatal("Forward reported a reply from an agent that sent none")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Forward still waiting on a silent agent")
	}
	select {
	case c := <-held:
		c.Close()
	default:
	}
	if _, ok := Forward(filepath.Join(t.TempDir(), "none.sock"), Request{}); ok {
		t.Fatal("Forward to a missing socket reported a reply")
	}
}
