package iptables

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Long-lived restores. On the nf_tables backend every iptables-restore
// starts by loading its shared libraries and extensions, which costs about
// 3-4 ms of CPU before it reads a line; a pod's ADD or DEL needs one
// restore of the filter table, so that start-up was a tenth of what a pod
// costs the node. iptables-nft-restore reads its input line by line and
// commits each "*table ... COMMIT" block as it reaches it, fetching the
// kernel's current table for each block (so other writers are seen, as by
// a fresh process), so one process can take one transaction after
// another: Sessions keeps one per restore binary and network namespace.
//
// Nothing on its stdout says a block is done, and a block that changes
// nothing commits no nf_tables transaction, so completion is read from the
// kernel: the child has taken all input (the pipe is empty) and sleeps in
// read(2) on its stdin (/proc/<pid>/syscall), which with input ending in a
// newline means it has parsed and committed every line. A rejected block
// makes the child print the failing line (counted from its first input)
// and exit, as a one-shot restore does.
//
// The legacy backend's restore holds the xtables lock for its whole life,
// so it is only ever run one-shot.

// errNoSession: no long-lived restore can be used here; run one-shot.
var errNoSession = errors.New("no long-lived restore")

// sessionTimeout bounds one block: the one-shot restore has no bound, but
// a long-lived one that stops reading must not hold the dataplane forever.
const sessionTimeout = 2 * time.Minute

// Sessions keeps the long-lived restores of one network namespace (the
// Tables of a dataplane share one). Close ends them; a process killed
// without Close leaves its children reading EOF, and they exit.
type Sessions struct {
	mu       sync.Mutex
	procs    map[string]*session
	disabled bool // the kernel lacks what completion detection needs
}

// NewSessions returns an empty set; a restore starts on first use.
func NewSessions() *Sessions { return &Sessions{procs: map[string]*session{}} }

// Close ends every long-lived restore.
func (s *Sessions) Close() {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for cmd, p := range s.procs {
		p.stop()
		delete(s.procs, cmd)
	}
}

// Running is the number of long-lived restores alive (for tests).
func (s *Sessions) Running() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.procs)
}

// sessionResult is a block's outcome: the child's stderr when it rejected
// the block, and how many input lines it had taken before this block
// (its error names lines counted from its first input).
type sessionResult struct {
	stderr    []byte
	lineShift int
}

// restore feeds input (whole "*table ... COMMIT" blocks ending in a
// newline) to the long-lived cmd of the calling thread's network
// namespace, starting one when there is none, and returns when the child
// has committed all of it. errNoSession: use a one-shot restore instead.
func (s *Sessions) restore(cmd string, input []byte) (sessionResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.disabled {
		return sessionResult{}, errNoSession
	}
	ns, err := threadNetns()
	if err != nil {
		return sessionResult{}, errNoSession
	}
	p := s.procs[cmd]
	if p != nil && p.netns != ns {
		p.stop()
		p = nil
	}
	if p == nil {
		if p, err = startSession(cmd, ns); err != nil {
			if errors.Is(err, errNoSession) {
				s.disabled = true
			}
			delete(s.procs, cmd)
			return sessionResult{}, errNoSession
		}
		s.procs[cmd] = p
	}
	res := sessionResult{lineShift: p.lines}
	if err := p.feed(input); err != nil {
		delete(s.procs, cmd)
		res.stderr = p.stop()
		return res, err
	}
	p.lines += bytes.Count(input, []byte("\n"))
	return res, nil
}

// threadNetns identifies the calling thread's network namespace.
func threadNetns() (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat("/proc/thread-self/ns/net", &st); err != nil {
		return 0, err
	}
	return st.Ino, nil
}

// session is one long-lived `<cmd> --noflush`.
type session struct {
	cmd     *exec.Cmd
	stdin   int // our non-blocking end of its stdin pipe
	pidfd   int // readable once the child has exited
	stderr  bytes.Buffer
	netns   uint64
	lines   int    // input lines taken so far
	sysFd   int    // /proc/<pid>/syscall, kept open (read at offset 0: a fresh answer each time)
	idleSys []byte // its first fields while blocked reading fd 0
}

// startSession starts cmd in the calling thread's network namespace (the
// caller holds its thread there, as for one-shot restores).
func startSession(cmd string, ns uint64) (*session, error) {
	var fds [2]int
	if err := unix.Pipe2(fds[:], unix.O_CLOEXEC); err != nil {
		return nil, err
	}
	r := os.NewFile(uintptr(fds[0]), "restore-stdin")
	defer r.Close()
	if err := unix.SetNonblock(fds[1], true); err != nil {
		unix.Close(fds[1])
		return nil, err
	}
	p := &session{stdin: fds[1], pidfd: -1, sysFd: -1, netns: ns, idleSys: []byte(strconv.Itoa(unix.SYS_READ) + " 0x0 ")}
	p.cmd = exec.Command(cmd, "--noflush")
	p.cmd.Stdin, p.cmd.Stderr = r, &p.stderr
	if err := p.cmd.Start(); err != nil {
		unix.Close(fds[1])
		return nil, err
	}
	pid := p.cmd.Process.Pid
	var err error
	if p.pidfd, err = unix.PidfdOpen(pid, 0); err != nil {
		p.stop()
		return nil, fmt.Errorf("%w: pidfd_open: %v", errNoSession, err)
	}
	if p.sysFd, err = unix.Open(fmt.Sprintf("/proc/%d/syscall", pid), unix.O_RDONLY|unix.O_CLOEXEC, 0); err != nil {
		p.stop()
		return nil, fmt.Errorf("%w: %v", errNoSession, err)
	}
	var buf [64]byte
	if _, err := unix.Pread(p.sysFd, buf[:], 0); err != nil {
		p.stop()
		return nil, fmt.Errorf("%w: reading /proc/%d/syscall: %v", errNoSession, pid, err)
	}
	return p, nil
}

// errExited: the child exited, which it does only on a rejected block (or
// when killed).
var errExited = errors.New("iptables-restore exited")

// feed writes input and waits until the child has committed it.
func (p *session) feed(input []byte) error {
	deadline := time.Now().Add(sessionTimeout)
	for len(input) > 0 {
		n, err := unix.Write(p.stdin, input)
		if n > 0 {
			input = input[n:]
		}
		switch {
		case err == nil || err == unix.EINTR:
		case err == unix.EAGAIN:
			if exited, err := p.poll(unix.POLLOUT, time.Until(deadline)); exited || err != nil {
				return p.failed(exited, err)
			}
		default:
			return p.failed(p.exited(), err)
		}
	}
	for delay := 50 * time.Microsecond; ; delay = min(2*delay, 2*time.Millisecond) {
		if exited, err := p.poll(0, delay); exited || err != nil {
			return p.failed(exited, err)
		}
		if p.idle() {
			return nil
		}
		if time.Now().After(deadline) {
			return p.failed(false, fmt.Errorf("no progress for %v", sessionTimeout))
		}
	}
}

func (p *session) failed(exited bool, err error) error {
	if exited {
		return errExited
	}
	return fmt.Errorf("long-lived %s: %w", p.cmd.Path, err)
}

// poll waits up to d for the child to exit or, with events, for our end
// of its stdin to be ready.
func (p *session) poll(events int16, d time.Duration) (exited bool, err error) {
	fds := []unix.PollFd{{Fd: int32(p.pidfd), Events: unix.POLLIN}}
	if events != 0 {
		fds = append(fds, unix.PollFd{Fd: int32(p.stdin), Events: events})
	}
	if d < 0 {
		d = 0
	}
	ts := unix.NsecToTimespec(d.Nanoseconds())
	if _, err := unix.Ppoll(fds, &ts, nil); err != nil && err != unix.EINTR {
		return false, err
	}
	if events != 0 && fds[1].Revents&(unix.POLLERR|unix.POLLHUP) != 0 {
		return p.exited(), nil
	}
	return fds[0].Revents&unix.POLLIN != 0, nil
}

func (p *session) exited() bool {
	fds := []unix.PollFd{{Fd: int32(p.pidfd), Events: unix.POLLIN}}
	n, _ := unix.Poll(fds, 0)
	return n > 0
}

// idle reports whether the child has taken all input and sleeps reading
// more: everything written so far is parsed and committed.
func (p *session) idle() bool {
	// TIOCINQ is FIONREAD: the bytes still in the pipe.
	if n, err := unix.IoctlGetInt(p.stdin, unix.TIOCINQ); err != nil || n != 0 {
		return false
	}
	var buf [64]byte
	n, err := unix.Pread(p.sysFd, buf[:], 0)
	return err == nil && bytes.HasPrefix(buf[:max(n, 0)], p.idleSys)
}

// stop ends the child (it has no block in flight) and returns what it
// printed on stderr.
func (p *session) stop() []byte {
	unix.Close(p.stdin)
	_ = p.cmd.Process.Kill()
	_ = p.cmd.Wait()
	if p.pidfd >= 0 {
		unix.Close(p.pidfd)
	}
	if p.sysFd >= 0 {
		unix.Close(p.sysFd)
	}
	return bytes.TrimSpace(p.stderr.Bytes())
}
