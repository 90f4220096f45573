package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The README starts with the two commands a new user types on a fresh
// machine as root (where sudo is not installed): the demo and the tests,
// exactly as .ci/run runs the tests; no command the project documents or
// runs goes through sudo.
func TestReadmeCommandsWorkAsRoot(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	var cmds []string
	for _, line := range strings.Split(string(readme), "\n") {
		if strings.HasPrefix(line, "    ") {
			cmds = append(cmds, strings.TrimSpace(strings.SplitN(line, "#", 2)[0]))
		} else if len(cmds) > 0 && strings.TrimSpace(line) == "" {
			break // the first block of commands ends
		}
	}
	if len(cmds) < 2 || cmds[0] != "make demo" || cmds[1] != "make test" {
		t.Errorf("the README's first commands are %q, want \"make demo\" then \"make test\"", cmds)
	}
	ci, err := os.ReadFile(filepath.Join(".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^make test$`).Match(ci) {
		t.Errorf(".ci/run does not run exactly the README's test command (make test):\n%s", ci)
	}
	sudo := regexp.MustCompile(`(^|[\s;&|(` + "`" + `$])sudo\s`)
	files := []string{"README.md", "Makefile"}
	for _, pat := range []string{"docs/*.md", "build/*.sh", "build/*/*.sh", "tools/*/*.sh"} {
		m, _ := filepath.Glob(pat)
		files = append(files, m...)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			if sudo.MatchString(line) {
				t.Errorf("%s:%d uses sudo, which a fresh machine run as root does not have: %s", f, i+1, line)
			}
		}
	}
}
