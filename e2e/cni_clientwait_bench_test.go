package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/calico-aio/calico-aio/cni/fastpath"
)

// standInAgent serves the CNI socket in dir the way calico-node does, minus
// the work: it reads the whole request, waits, and answers "mine" with a
// fixed result. The wait stands for the agent's serving of the call.
type standInAgent struct {
	l    net.Listener
	wait atomic.Int64 // nanoseconds
}

// standInResult is what the stand-in answers on stdout.
const standInResult = `{"cniVersion":"1.0.0"}`

func newStandInAgent(b *testing.B, dir string) *standInAgent {
	l, err := net.Listen("unix", filepath.Join(dir, fastpath.SocketName))
	if err != nil {
		b.Fatal(err)
	}
	a := &standInAgent{l: l}
	b.Cleanup(func() { l.Close() })
	reply, _ := json.Marshal(fastpath.Reply{Mine: true, Stdout: []byte(standInResult)})
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				if _, err := io.Copy(io.Discard, c); err != nil { // the client shuts its side after the request
					return
				}
				time.Sleep(time.Duration(a.wait.Load()))
				_, _ = c.Write(reply)
			}()
		}
	}()
	return a
}

// clientCPU execs bin as the calico plugin for one ADD answered by the
// stand-in agent and returns the process's CPU (user + system).
func clientCPU(b *testing.B, bin, netconf string) time.Duration {
	cmd := exec.Command(bin)
	cmd.Env = []string{"CNI_COMMAND=ADD", "CNI_CONTAINERID=wait", "CNI_NETNS=/var/run/netns/none", "CNI_IFNAME=eth0", "CNI_PATH=" + filepath.Dir(bin)}
	cmd.Stdin = strings.NewReader(netconf)
	out, err := cmd.Output()
	if err != nil || string(out) != standInResult {
		b.Fatalf("%s: %v; stdout %q, want the stand-in's %q", bin, err, out, standInResult)
	}
	return rusageCPU(cmd.ProcessState.SysUsage().(*syscall.Rusage))
}

// BenchmarkCNIClientWait prices the fast-path client alone: the binary
// exec'd as the calico plugin against a stand-in agent that answers after
// 0, 2, 8 and 30 ms (an ADD is served in about 5-10 ms, a DEL waits ~30 ms
// on the kernel's link delete), the process's CPU per call, the exec of an
// empty static Go program interleaved as the floor. CNI_CLIENT_BASELINE
// names an older build, run interleaved call by call, with the ratio
// reported; CNI_CLIENT_CALLS sets the calls per wait (default 200).
func BenchmarkCNIClientWait(b *testing.B) {
	calls := 200
	if v := os.Getenv("CNI_CLIENT_CALLS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("CNI_CLIENT_CALLS=%q: want a positive number", v)
		}
		calls = n
	}
	dir := b.TempDir()
	agent := newStandInAgent(b, dir)
	netconf := fmt.Sprintf(`{"cniVersion":"1.0.0","name":"wait","type":"calico","calico_run_dir":%q}`, dir)
	bins := []string{filepath.Join(cniBinDir(b), "calico")}
	if base := os.Getenv("CNI_CLIENT_BASELINE"); base != "" {
		link := filepath.Join(b.TempDir(), "calico")
		if err := os.Symlink(base, link); err != nil {
			b.Fatal(err)
		}
		bins = append(bins, link)
	}
	floor := newExecFloor(b)
	for range b.N {
		for _, wait := range []time.Duration{0, 2 * time.Millisecond, 8 * time.Millisecond, 30 * time.Millisecond} {
			agent.wait.Store(int64(wait))
			sum := make([]time.Duration, len(bins))
			floor.sum, floor.n = 0, 0
			for range calls {
				for k, bin := range bins {
					sum[k] += clientCPU(b, bin, netconf)
				}
				floor.run(b)
			}
			per := func(d time.Duration) float64 { return millis(d / time.Duration(calls)) }
			line := fmt.Sprintf("wait %v: client CPU %.3f ms per call (exec floor %.3f ms)", wait, per(sum[0]), millis(floor.perRun()))
			b.ReportMetric(per(sum[0]), fmt.Sprintf("cpu-ms/call-wait%dms", wait.Milliseconds()))
			if len(bins) > 1 {
				line += fmt.Sprintf("; baseline %.3f ms, ratio %.2fx", per(sum[1]), float64(sum[0])/float64(sum[1]))
				b.ReportMetric(float64(sum[0])/float64(sum[1]), fmt.Sprintf("vs-baseline-wait%dms-ratio", wait.Milliseconds()))
			}
			b.Log(line)
		}
	}
}
