package cni

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"
)

// TestNetConfKeysErrorsNameTheKey: each key of Calico 3.32's netconf
// beyond the core ones refuses wrong types and impossible values with
// CNI error 7 naming it.
func TestNetConfKeysErrorsNameTheKey(t *testing.T) {
	const ipam = `"ipam":{"type":"calico-ipam"}`
	cases := map[string]string{
		`"policy_setup_timeout_seconds":-1`:      "policy_setup_timeout_seconds",
		`"policy_setup_timeout_seconds":"5"`:     "policy_setup_timeout_seconds",
		`"endpoint_status_dir":"run/status"`:     "endpoint_status_dir",
		`"readiness_gates":["not a url"]`:        "readiness_gates",
		`"readiness_gates":"http://x/ready"`:     "readiness_gates",
		`"require_mtu_file":"yes"`:               "require_mtu_file",
		`"num_queues":-1`:                        "num_queues",
		`"num_queues":5000`:                      "num_queues",
		`"ipam_lock_file":"ipam.lock"`:           "ipam_lock_file",
		`"nodename_file_optional":1`:             "nodename_file_optional",
		`"include_default_routes":"true"`:        "include_default_routes",
		`"log_file_path":"cni.log"`:              "log_file_path",
		`"log_file_max_size":-1`:                 "log_file_max_size",
		`"log_file_max_age":-2`:                  "log_file_max_age",
		`"log_file_max_count":-3`:                "log_file_max_count",
		`"log_file_max_size":"big"`:              "log_file_max_size",
		`"feature_control":{"floating_ips":"1"}`: "feature_control.floating_ips",
	}
	for keys, field := range cases {
		conf := `{"name":"n",` + keys + `,` + ipam + `}`
		_, err := LoadNetConf([]byte(conf))
		var te *types.Error
		if !errors.As(err, &te) || te.Code != types.ErrInvalidNetworkConfig || !strings.Contains(te.Msg, field) {
			t.Errorf("%s: %v, want error 7 naming %s", conf, err, field)
		}
	}
	routes := map[string]string{
		`{"name":"n","ipam":{"type":"calico-ipam","routes":[{"dst":"10.96.0.0/12"}]}}`: "ipam.routes",
		`{"name":"n","ipam":{"type":"host-local","routes":[{"dst":"10.96.0.0"}]}}`:     "ipam.routes[0].dst",
		`{"name":"n","ipam":{"type":"host-local","routes":{"dst":"10.96.0.0/12"}}}`:    "ipam.routes",
	}
	for conf, field := range routes {
		_, err := LoadNetConf([]byte(conf))
		var te *types.Error
		if !errors.As(err, &te) || te.Code != types.ErrInvalidNetworkConfig || !strings.Contains(te.Msg, field) {
			t.Errorf("%s: %v, want error 7 naming %s", conf, err, field)
		}
	}
}

func TestNetConfKeysValid(t *testing.T) {
	c, err := LoadNetConf([]byte(`{"name":"n","policy_setup_timeout_seconds":10,"endpoint_status_dir":"/run/st",
"readiness_gates":["http://127.0.0.1:9099/readiness"],"require_mtu_file":true,"num_queues":4,"ipam_lock_file":"/run/l",
"nodename_file_optional":true,"log_file_path":"/var/log/calico/cni/cni.log","log_file_max_size":1,"log_file_max_age":2,"log_file_max_count":3,
"include_default_routes":true,"ipam":{"type":"host-local","subnet":"10.1.0.0/24","routes":[{"dst":"10.96.0.0/12"},{"dst":"fd00:96::/64"}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.statusDir() != "/run/st" || c.numQueues() != 4 || c.lockPath() != "/run/l" {
		t.Errorf("status dir %s, queues %d, lock %s", c.statusDir(), c.numQueues(), c.lockPath())
	}
	want := []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0"), netip.MustParsePrefix("10.96.0.0/12"), netip.MustParsePrefix("fd00:96::/64")}
	if got := c.podRoutes(); !slices.Equal(got, want) {
		t.Errorf("pod routes %v, want %v", got, want)
	}
	c.IncludeDefaultRoutes = false
	if got := c.podRoutes(); len(got) != 2 {
		t.Errorf("pod routes without include_default_routes %v", got)
	}
	d, _ := LoadNetConf([]byte(`{"name":"n","calico_run_dir":"/r","ipam":{"type":"calico-ipam"}}`))
	if d.statusDir() != "/r/endpoint-status" || d.numQueues() != 1 || d.lockPath() != "/r/ipam.lock" || d.podRoutes() != nil {
		t.Errorf("defaults: status dir %s, queues %d, lock %s, routes %v", d.statusDir(), d.numQueues(), d.lockPath(), d.podRoutes())
	}
}

// TestRequireMTUFile: with require_mtu_file a missing MTU file fails the
// ADD, even when the netconf names an MTU.
func TestRequireMTUFile(t *testing.T) {
	lib := t.TempDir()
	c := &NetConf{LibDir: lib, MTU: 1400, RequireMTUFile: true}
	if _, err := c.PodMTU(); err == nil || !strings.Contains(err.Error(), "MTU file") {
		t.Errorf("missing MTU file with require_mtu_file: %v", err)
	}
	c.RequireMTUFile = false
	if m, err := c.PodMTU(); err != nil || m != 1400 {
		t.Errorf("without require_mtu_file: %d %v", m, err)
	}
	if err := os.WriteFile(filepath.Join(lib, "mtu"), []byte("1440\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c.RequireMTUFile, c.MTU = true, 0
	if m, err := c.PodMTU(); err != nil || m != 1440 {
		t.Errorf("MTU file present: %d %v", m, err)
	}
}

// TestWaitForFile: the policy wait returns once the status file appears,
// and gives up with an error naming it after the timeout.
func TestWaitForFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "k8s ns%2Fpod eth0")
	go func() {
		time.Sleep(100 * time.Millisecond)
		_ = os.WriteFile(file, nil, 0o644)
	}()
	if err := waitForFile(file, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(file); err != nil {
		t.Fatalf("wait returned before the file existed: %v", err)
	}
	err := waitForFile(filepath.Join(dir, "absent"), 50*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "absent") {
		t.Errorf("wait for an absent file: %v", err)
	}
}

// TestReadinessGates: a gate answering 503 is polled until it answers 200;
// one that never does fails the ADD with an error naming it.
func TestReadinessGates(t *testing.T) {
	defer func(i, to time.Duration) { gateInterval, gateTimeout = i, to }(gateInterval, gateTimeout)
	// Each poll's request times out after the interval: generous enough
	// that a loaded machine still gets the down gate's 500 (CI once saw
	// "context deadline exceeded" at 10 ms).
	gateInterval, gateTimeout = 250*time.Millisecond, time.Second
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) < 3 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusInternalServerError) }))
	defer down.Close()
	c := &NetConf{ReadinessGates: []string{srv.URL + "/ready"}}
	if err := c.waitForGates(); err != nil || calls.Load() != 3 {
		t.Errorf("gate ready on the third poll: %v after %d calls", err, calls.Load())
	}
	c.ReadinessGates = append(c.ReadinessGates, down.URL+"/ready")
	err := c.waitForGates()
	var te *types.Error
	if !errors.As(err, &te) || !strings.Contains(te.Msg, down.URL) || !strings.Contains(te.Details, "500") {
		t.Errorf("gate never ready: %v", err)
	}
}

// TestPluginLogFile: the plugin logs at log_level to log_file_path (and
// stderr), rotating at log_file_max_size MB and keeping at most
// log_file_max_count rotated files.
func TestPluginLogFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "cni.log")
	c := &NetConf{LogLevel: "warning", LogFilePath: path, LogFileMaxSize: 1, LogFileMaxCount: 1}
	var stderr strings.Builder
	w := c.logWriter(&stderr)
	line := strings.Repeat("x", 300<<10) + "\n"
	for i := 0; i < 8; i++ { // 2.4 MB: at least two rotations
		if _, err := w.Write([]byte(line)); err != nil {
			t.Fatal(err)
		}
	}
	if stderr.Len() != 8*len(line) {
		t.Errorf("stderr got %d bytes, want every line", stderr.Len())
	}
	if c.logLevel().String() != "WARN" {
		t.Errorf("log_level warning is %s", c.logLevel())
	}
	deadline := time.Now().Add(5 * time.Second) // old files are pruned in the background
	for {
		entries, _ := os.ReadDir(dir)
		if len(entries) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("log dir holds %d files, want the log and one rotated file", len(entries))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if st, err := os.Stat(path); err != nil || st.Size() > 1<<20 {
		t.Errorf("current log file %v %v, want at most 1 MB", st, err)
	}
}

// TestNodenameFileOptional: explicitly false, ADD needs the nodename file
// (Calico's error); true or unset, it does not.
func TestNodenameFileOptional(t *testing.T) {
	lib := t.TempDir()
	f, tr := false, true
	c := &NetConf{LibDir: lib, Nodename: "node1", NodenameFileOptional: &f}
	if err := c.checkNodenameFile(); err == nil || !strings.Contains(err.Error(), "check that the calico/node container is running") {
		t.Errorf("nodename_file_optional false without the file: %v", err)
	}
	for _, opt := range []*bool{nil, &tr} {
		c.NodenameFileOptional = opt
		if err := c.checkNodenameFile(); err != nil {
			t.Errorf("nodename_file_optional %v: %v", opt, err)
		}
	}
	if err := os.WriteFile(filepath.Join(lib, "nodename"), []byte("node1"), 0o644); err != nil {
		t.Fatal(err)
	}
	c.NodenameFileOptional = &f
	if err := c.checkNodenameFile(); err != nil {
		t.Errorf("nodename_file_optional false with the file: %v", err)
	}
}

// TestServedCallLog: calls calico-node serves are recorded in the
// netconf's log_file_path at its log_level, through one writer per file.
func TestServedCallLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cni.log")
	var s servedLogs
	conf := []byte(`{"name":"n","log_file_path":"` + path + `","ipam":{"type":"calico-ipam"}}`)
	s.logServed(conf, "calico", "ADD", "c1", nil)
	s.logServed(conf, "calico", "DEL", "c1", errors.New("boom"))
	quiet := []byte(`{"name":"n","log_level":"error","log_file_path":"` + path + `","ipam":{"type":"calico-ipam"}}`)
	s.logServed(quiet, "calico", "CHECK", "c1", nil)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got := string(b)
	if !strings.Contains(got, "command=ADD") || !strings.Contains(got, "err=boom") || strings.Contains(got, "command=CHECK") {
		t.Errorf("log file:\n%s", got)
	}
	if len(s.files) != 1 {
		t.Errorf("%d writers for one file, want one (kept across calls)", len(s.files))
	}
}
