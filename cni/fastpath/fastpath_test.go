package fastpath

import (
	"net"
	"os"
	"path/filepath"
	"runtime"
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

// A stdout pipe left non-blocking and full: writeAll waits for the reader
// instead of dropping the rest of the agent's answer.
func TestWriteAllWaitsOnAFullNonBlockingPipe(t *testing.T) {
	var p [2]int
	if err := syscall.Pipe2(p[:], syscall.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(p[0])
	if err := syscall.SetNonblock(p[1], true); err != nil {
		t.Fatal(err)
	}
	want := make([]byte, 1<<20) // far more than a pipe holds
	for i := range want {
		want[i] = byte(i)
	}
	errc := make(chan error, 1)
	go func() {
		errc <- writeAll(p[1], want)
		syscall.Close(p[1])
	}()
	got, err := readAll(p[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil || len(got) != len(want) || string(got) != string(want) {
		t.Fatalf("writeAll: %v; the reader got %d of %d bytes", err, len(got), len(want))
	}
}

// After a forward that set one P and got no answer, the in-process plugin
// runs with the Ps it had: the environment's GOMAXPROCS when set, else the
// runtime's default.
func TestRestoreProcs(t *testing.T) {
	procs := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(procs)
	t.Setenv("GOMAXPROCS", "3")
	runtime.GOMAXPROCS(3)
	runtime.GOMAXPROCS(1)
	restoreProcs(3)
	if got := runtime.GOMAXPROCS(0); got != 3 {
		t.Fatalf("with GOMAXPROCS=3 in the environment, restoreProcs left %d Ps", got)
	}
	os.Unsetenv("GOMAXPROCS")
	runtime.SetDefaultGOMAXPROCS()
	def := runtime.GOMAXPROCS(0)
	runtime.GOMAXPROCS(1)
	restoreProcs(def)
	if got := runtime.GOMAXPROCS(0); got != def {
		t.Fatalf("restoreProcs left %d Ps, want the runtime's default %d", got, def)
	}
	if def == 1 {
		t.Log("one CPU: the default case proves nothing here")
	}
}
