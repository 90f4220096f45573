// Package fastpath hands a CNI call to the running calico-node over a unix
// socket, before the rest of the binary is even initialised.
//
// It must stay tiny: it imports only syscall and the few standard
// packages Go initialises before it (not os, encoding/json or net, nor
// anything of ours). See init below for why.
package fastpath

import (
	"runtime"
	"syscall"
	"unsafe"
)

// SocketName is the agent's CNI socket inside its run directory.
const SocketName = "cni.sock"

// DefaultRunDir is the run directory when the netconf names none
// (calico_run_dir), as cni.DefaultRunDir.
const DefaultRunDir = "/var/run/calico"

// InProcessEnv, when set in a CNI call's environment, skips the agent (for
// benchmarks and for comparing the two paths).
const InProcessEnv = "CALICO_CNI_IN_PROCESS"

// maxReply bounds what the client reads back.
const maxReply = 16 << 20

// replyTimeout bounds each read and write on the socket: an agent that
// hangs makes the call fall back in-process rather than hang the pod's
// start until the runtime gives up. A served call is far shorter (the
// agent's datastore calls time out after 5 s each).
var replyTimeout = syscall.Timeval{Sec: 60}

// Request is one CNI call: argv[0]'s base name, the environment and stdin.
type Request struct {
	Plugin string   `json:"plugin"`
	Env    []string `json:"env"`
	Stdin  []byte   `json:"stdin"`
}

// Reply is the agent's answer. When Mine is false the client runs the call
// in-process and Reason says why the agent did not.
type Reply struct {
	Mine   bool   `json:"mine"`
	Reason string `json:"reason,omitempty"`
	Stdout []byte `json:"stdout,omitempty"`
	Exit   int    `json:"exit"`
}

// This init is the one unusual thing in the binary. Go initialises
// packages in import-path order, each as soon as its imports are done (Go
// spec, since 1.21): the first package in that order whose imports are
// all initialised goes next. This package sorts under github.com/calico-aio
// and imports only syscall and packages initialised before it (the JSON
// it needs is in wire.go, argv[0] read from /proc), so it runs right after
// syscall: before os and encoding/json, which would have let every
// package sorting before them that was ready go first (crypto, compress,
// protobuf and gRPC internals, go-cmp, ...), and before any heavy one
// (protobuf registration, gRPC, etcd, GoBGP, client-go). Invoked as a CNI
// plugin with calico-node serving its socket, it forwards the call,
// prints the agent's answer and exits right here, so the call never pays
// for the rest of the binary's initialisation. When the socket is
// missing, refuses, drops mid-call or the agent answers "not mine", init
// returns (stdin put back) and cni/inproc's init runs the plugin
// in-process once the plugin's own packages are initialised.
// TestCNIFastPathInitOrder (e2e/cni_fastpath_test.go) holds this.
func init() {
	plugin := baseName(argv0())
	if plugin != "calico" && plugin != "calico-ipam" {
		return
	}
	switch cmd, _ := syscall.Getenv("CNI_COMMAND"); cmd {
	case "ADD", "DEL", "CHECK", "GC", "STATUS":
	default:
		return
	}
	if v, _ := syscall.Getenv(InProcessEnv); v != "" {
		return
	}
	stdin, err := readAll(0)
	if err == nil {
		procs := runtime.GOMAXPROCS(0)
		rep, ok := forward(SocketPath(stdin), Request{Plugin: plugin, Env: syscall.Environ(), Stdin: stdin}, procs > 1)
		if ok && rep.Mine {
			_ = writeAll(1, rep.Stdout)
			syscall.Exit(rep.Exit)
		}
		restoreProcs(procs)
	}
	restoreStdin(stdin)
}

// restoreProcs gives the in-process plugin back the Ps it had before
// forward: the environment's GOMAXPROCS when set, else the runtime's
// default (with its automatic updates).
func restoreProcs(procs int) {
	if runtime.GOMAXPROCS(0) == procs {
		return
	}
	if _, set := syscall.Getenv("GOMAXPROCS"); set {
		runtime.GOMAXPROCS(procs)
		return
	}
	runtime.SetDefaultGOMAXPROCS()
}

// argv0 is the process's argv[0], from /proc/self/cmdline ("" when it
// cannot be read: the call then runs in-process).
func argv0() string {
	fd, err := syscall.Open("/proc/self/cmdline", syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return ""
	}
	defer syscall.Close(fd)
	b, _ := readAll(fd)
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}

// writeAll writes b to fd whole, waiting when fd is non-blocking and full
// (a stdout pipe its creator left non-blocking: os.File would wait in the
// runtime's poller).
func writeAll(fd int, b []byte) error {
	for len(b) > 0 {
		n, err := syscall.Write(fd, b)
		if err == syscall.EINTR {
			continue
		}
		if err == syscall.EAGAIN {
			waitWritable(fd)
			continue
		}
		if err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

// waitWritable blocks until fd can be written.
func waitWritable(fd int) {
	var w syscall.FdSet
	per := 8 * int(unsafe.Sizeof(w.Bits[0]))
	w.Bits[fd/per] |= 1 << (fd % per)
	_, _ = syscall.Select(fd+1, nil, &w, nil, nil)
}

// SocketPath is <calico_run_dir>/cni.sock for a netconf.
func SocketPath(netconf []byte) string {
	dir := runDir(netconf)
	if dir == "" {
		dir = DefaultRunDir
	}
	return dir + "/" + SocketName
}

// Forward sends the request and reads the whole reply; ok is false when
// the socket is missing or refuses, the connection drops before a complete
// reply, or the agent is silent for replyTimeout.
func Forward(path string, req Request) (rep Reply, ok bool) {
	return forward(path, req, false)
}

// forward is Forward; with oneP, once connected, it sets GOMAXPROCS to 1
// for the wait (the plugin's own process only; restoreProcs undoes it).
// The client's only goroutine then sits in a blocking read for as long as
// the agent works (an ADD's whole serving, a DEL's link delete): with two
// or more Ps the others stay idle, so the runtime's sysmon neither takes
// the blocked P back (for 10 ms) nor sleeps, and wakes every 20 µs for a
// millisecond and more, each wake-up costing about as much as a small
// syscall; with one P it hands that P off at its first look and sleeps
// until the read returns. BenchmarkCNIClientWait (e2e) measures it.
func forward(path string, req Request, oneP bool) (rep Reply, ok bool) {
	data := appendRequest(nil, req)
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return rep, false
	}
	defer syscall.Close(fd)
	for _, opt := range []int{syscall.SO_RCVTIMEO, syscall.SO_SNDTIMEO} {
		if syscall.SetsockoptTimeval(fd, syscall.SOL_SOCKET, opt, &replyTimeout) != nil {
			return rep, false
		}
	}
	if err := syscall.Connect(fd, &syscall.SockaddrUnix{Name: path}); err != nil {
		return rep, false
	}
	if oneP {
		runtime.GOMAXPROCS(1)
	}
	if writeAll(fd, data) != nil {
		return rep, false
	}
	if syscall.Shutdown(fd, syscall.SHUT_WR) != nil {
		return rep, false
	}
	got, err := readAll(fd)
	if err != nil {
		return Reply{}, false
	}
	if rep, err = decodeReply(got); err != nil {
		return Reply{}, false
	}
	return rep, true
}

func readAll(fd int) ([]byte, error) {
	buf := make([]byte, 0, 4096)
	for {
		if len(buf) == cap(buf) {
			if len(buf) >= maxReply {
				return buf, syscall.EFBIG
			}
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := syscall.Read(fd, buf[len(buf):cap(buf)])
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return buf, err
		}
		if n == 0 {
			return buf, nil
		}
		buf = buf[:len(buf)+n]
	}
}

// restoreStdin makes fd 0 a pipe that yields data again, so the in-process
// plugin reads the stdin this package consumed.
func restoreStdin(data []byte) {
	var p [2]int
	if err := syscall.Pipe2(p[:], syscall.O_CLOEXEC); err != nil {
		return
	}
	if err := syscall.Dup3(p[0], 0, 0); err != nil {
		syscall.Close(p[0])
		syscall.Close(p[1])
		return
	}
	syscall.Close(p[0])
	go func() { // a pipe holds 64 KiB; a larger netconf is written as it is read
		_ = writeAll(p[1], data)
		syscall.Close(p[1])
	}()
}

func baseName(p string) string {
	for i := len(p) - 1; i >= 0; i-- {
		if p[i] == '/' {
			return p[i+1:]
		}
	}
	return p
}
