package iptables

import (
	"bytes"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
)

// runFunc runs one command to completion and returns its output. The real
// one (runCommand) execs on the calling goroutine, so a caller that wraps
// Apply in ns.Do (thread locked into a network namespace) has every child
// process start in that namespace. Tests swap in a stateful fake.
type runFunc func(stdin []byte, name string, args ...string) (stdout, stderr []byte, err error)

func runCommand(stdin []byte, name string, args ...string) ([]byte, []byte, error) {
	cmd := exec.Command(name, args...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	return out.Bytes(), errOut.Bytes(), err
}

// waitRejected reports whether a command rejected our --wait flag, as
// getopt prints it ("unrecognized option '--wait'"); not to be confused
// with a rule's unknown option in restore input.
func waitRejected(stderr []byte) bool {
	s := string(stderr)
	return strings.Contains(s, "option '--wait'") || strings.Contains(s, "option -- 'w'")
}

// lineRE finds the failing input line in iptables-restore ("line 3 failed",
// "line 3: CHAIN_DEL failed", "Error occurred at line: 3") and ipset restore
// ("Error in line 3:") error output.
var lineRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`line:? (\d+)`) })

// failedLine returns the 1-based input line an error message names, or 0.
func failedLine(stderr []byte) int {
	m := lineRE().FindSubmatch(stderr)
	if m == nil {
		return 0
	}
	n, err := strconv.Atoi(string(m[1]))
	if err != nil {
		return 0
	}
	return n
}

// inputLine returns line n (1-based) of input, or "".
func inputLine(input []byte, n int) string {
	if n <= 0 {
		return ""
	}
	lines := strings.Split(string(input), "\n")
	if n > len(lines) {
		return ""
	}
	return lines[n-1]
}
