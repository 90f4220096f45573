package felix

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"

	"github.com/calico-aio/calico-aio/felix/calc"
	"github.com/calico-aio/calico-aio/felix/config"
	"github.com/calico-aio/calico-aio/felix/config/configtest"
	"github.com/calico-aio/calico-aio/felix/health"
	"github.com/calico-aio/calico-aio/felix/metrics"
	"github.com/calico-aio/calico-aio/felix/node"
	"github.com/calico-aio/calico-aio/internal/nstest"
	"github.com/calico-aio/calico-aio/store/api"
)

// fc is a FelixConfiguration with one field set, felixUpdate the syncer's
// update for one (configtest).
var fc, felixUpdate = configtest.Object, configtest.Update

func ptr[T any](v T) *T { return &v }

// screenLevel is the lowest level h writes: the screen's, when the log file
// and syslog are off.
func screenLevel(h slog.Handler) slog.Level {
	for _, l := range []slog.Level{slog.LevelDebug - 4, slog.LevelDebug, slog.LevelInfo, slog.LevelWarn, slog.LevelError} {
		if h.Enabled(context.Background(), l) {
			return l
		}
	}
	return slog.Level(1 << 20)
}

// TestSettingsLogSeverityLive: logSeverityScreen from FelixConfiguration
// changes the running logger's level, node.<name> over default, and the
// environment wins over both.
func TestSettingsLogSeverityLive(t *testing.T) {
	for _, tc := range []struct {
		env  spec
		want []slog.Level
	}{
		{spec{}, []slog.Level{slog.LevelInfo, slog.LevelDebug, slog.LevelError, slog.LevelDebug, slog.LevelInfo}},
		{spec{LogSeverityScreen: "Warning"}, []slog.Level{slog.LevelWarn, slog.LevelWarn, slog.LevelWarn, slog.LevelWarn, slog.LevelWarn}},
	} {
		var screen bytes.Buffer
		logs, h := config.NewLogOutputs(&screen, "", "")
		log := slog.New(h)
		a := &agent{cfg: config.Config{NodeName: "n1"}, state: calc.NewState("n1"), overlay: calc.NewOverlay("n1"),
			metrics: metrics.New("n1", ""), settings: config.NewLoader("n1", tc.env), logs: logs}
		a.foldSettings()
		got := []slog.Level{screenLevel(h)}
		for _, u := range []calc.Update{
			felixUpdate(fc(t, "default", "logSeverityScreen", `"Debug"`), false),
			felixUpdate(fc(t, "node.n1", "logSeverityScreen", `"Error"`), false),
			felixUpdate(fc(t, "node.n1", "logSeverityScreen", `"Error"`), true),
			felixUpdate(fc(t, "default", "logSeverityScreen", `"Debug"`), true),
		} {
			a.fold(u)
			got = append(got, screenLevel(h))
			log.Debug("probe")
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("env %q: levels %v, want %v", tc.env.LogSeverityScreen, got, tc.want)
		}
		if n, want := strings.Count(screen.String(), "probe"), strings.Count(fmt.Sprint(tc.want[1:]), "DEBUG"); n != want {
			t.Errorf("env %q: debug probes on the screen: %d, want %d (one per Debug step)", tc.env.LogSeverityScreen, n, want)
		}
	}
}

// TestSettingsLogFileLive: logFilePath opens a file at logSeverityFile
// while the agent runs; a new path moves it; none closes it.
func TestSettingsLogFileLive(t *testing.T) {
	dir := t.TempDir()
	logs, h := config.NewLogOutputs(io.Discard, "", "")
	log := slog.New(h)
	a := &agent{cfg: config.Config{NodeName: "n1"}, state: calc.NewState("n1"), overlay: calc.NewOverlay("n1"),
		metrics: metrics.New("n1", ""), settings: config.NewLoader("n1", spec{}), logs: logs}
	a.foldSettings()
	read := func(name string) string { b, _ := os.ReadFile(filepath.Join(dir, name)); return string(b) }
	log.Info("before any file")
	f := fc(t, "default", "logFilePath", `"`+dir+`/a/felix.log"`)
	a.fold(felixUpdate(f, false))
	log.Info("info one")
	log.Debug("debug one")
	f.Spec.LogSeverityFile = "Debug"
	a.fold(felixUpdate(f, false))
	log.Debug("debug two")
	f.Spec.LogFilePath = dir + "/b.log"
	a.fold(felixUpdate(f, false))
	log.Warn("warn three")
	f.Spec.LogFilePath = "none"
	a.fold(felixUpdate(f, false))
	log.Error("error four")
	fa, fb := read("a/felix.log"), read("b.log")
	for _, c := range []struct {
		file, text string
		want       bool
	}{
		{fa, "before any file", false}, {fa, "info one", true}, {fa, "debug one", false}, {fa, "debug two", true},
		{fa, "warn three", false}, {fb, "warn three", true}, {fb, "error four", false},
	} {
		if strings.Contains(c.file, c.text) != c.want {
			t.Errorf("%q in file: %v, want %v\na: %s\nb: %s", c.text, !c.want, c.want, fa, fb)
		}
	}
}

// httpGetIn asks addr for path from inside n, dialling on the locked
// thread (an http.Client would dial from a thread outside n).
func httpGetIn(n ns.NetNS, addr, path string) (string, error) {
	return statusIn(n, path, func() (net.Conn, error) { return net.DialTimeout("tcp", addr, 5*time.Second) })
}

// statusIn sends a GET for path over the connection dial makes inside n
// and returns the response's status line.
func statusIn(n ns.NetNS, path string, dial func() (net.Conn, error)) (status string, err error) {
	err = n.Do(func(ns.NetNS) error {
		c, err := dial()
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := fmt.Fprintf(c, "GET %s HTTP/1.0\r\nHost: x\r\n\r\n", path); err != nil {
			return err
		}
		line, err := bufio.NewReader(c).ReadString('\n')
		status = strings.TrimSpace(line)
		return err
	})
	return status, err
}

// TestSettingsServersLive: in a namespace of its own, the health and
// metrics servers start at Calico's addresses (health on localhost:9099,
// metrics on :9091) and move, or stop, as FelixConfiguration changes
// while they run; --health-addr given wins over the settings.
func TestSettingsServersLive(t *testing.T) {
	nstest.NeedKernel(t)
	n := nstest.NewNS(t)
	if err := n.Do(func(ns.NetNS) error {
		lo, err := netlink.LinkByName("lo")
		if err != nil {
			return err
		}
		return netlink.LinkSetUp(lo) // all of 127/8 is then local
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a := &agent{cfg: config.Config{NodeName: "n1"}, state: calc.NewState("n1"), overlay: calc.NewOverlay("n1"), health: health.New(time.Minute),
		metrics: metrics.New("n1", ""), settings: config.NewLoader("n1", spec{})}
	a.health.Beat()
	a.health.SetReady(true)
	if err := n.Do(func(ns.NetNS) error { return a.startServers(ctx) }); err != nil {
		t.Fatal(err)
	}
	defer func() { a.healthSrv.Close(); a.metricsSrv.Close() }()
	want := func(addr, path string, up bool) {
		t.Helper()
		st, err := httpGetIn(n, addr, path)
		if up && (err != nil || !strings.Contains(st, "200")) {
			t.Errorf("%s%s: %q %v, want 200", addr, path, st, err)
		}
		if !up && err == nil {
			t.Errorf("%s%s answers %q, want nothing listening", addr, path, st)
		}
	}
	want("127.0.0.1:9099", "/liveness", true)
	want("127.0.0.2:9099", "/liveness", false) // localhost only
	want("127.0.0.2:9091", "/metrics", true)   // every address

	fold := func(f *api.FelixConfiguration) {
		t.Helper()
		if err := n.Do(func(ns.NetNS) error { a.fold(felixUpdate(f, false)); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	f := fc(t, "default", "healthHost", `"127.0.0.2"`)
	f.Spec.HealthPort, f.Spec.PrometheusMetricsPort = ptr(19099), ptr(19091)
	fold(f)
	want("127.0.0.2:19099", "/liveness", true)
	want("127.0.0.1:9099", "/liveness", false)
	want("127.0.0.1:19091", "/metrics", true)
	want("127.0.0.1:9091", "/metrics", false)

	f.Spec.HealthEnabled, f.Spec.PrometheusMetricsEnabled = ptr(false), ptr(false)
	fold(f)
	want("127.0.0.2:19099", "/liveness", false)
	want("127.0.0.1:19091", "/metrics", false)

	// A node's own object turns health back on at its port; the flag
	// given wins over both for metrics.
	a.cfg.MetricsAddrSet, a.cfg.MetricsAddr = true, "127.0.0.1:29091"
	fold(fc(t, "node.n1", "healthEnabled", `true`))
	want("127.0.0.2:19099", "/liveness", true)
	want("127.0.0.1:29091", "/metrics", true)
}

// TestSettingsVXLANEnvReachesDeviceAndPodMTU: FELIX_VXLANMTU (and the
// other vxlan* variables) reach the VXLAN device the overlay wants and the
// pod MTU alike, over what FelixConfiguration says, and a datastore value
// is used when the environment has none.
func TestSettingsVXLANEnvReachesDeviceAndPodMTU(t *testing.T) {
	env, err := config.ParseFelixEnv([]string{"FELIX_VXLANMTU=1350", "felix_vxlanenabled=true", "FELIX_VXLANVNI=77"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		env       spec
		mtu, vni  int
		podMTUWas int
	}{{env, 1350, 77, 1350}, {spec{}, 1400, 4096, 1400}} {
		a := &agent{cfg: config.Config{NodeName: "n1"}, state: calc.NewState("n1"), overlay: calc.NewOverlay("n1"),
			metrics: metrics.New("n1", ""), settings: config.NewLoader("n1", tc.env)}
		a.foldSettings()
		nk, _ := api.LookupKind("Node")
		n := nk.NewObject().(*api.Node)
		n.Metadata.Name = "n1"
		n.Spec.BGP = &api.NodeBGPSpec{IPv4Address: "10.0.1.1/24"}
		n.Spec.IPv4VXLANTunnelAddr, n.Spec.VXLANTunnelMACAddr = "10.65.0.1", "66:00:00:00:00:01"
		a.overlay.Apply(calc.Update{Kind: nk.Plural, Key: configtest.UpdateKey(nk, "n1"), Resource: n})
		f := fc(t, "default", "vxlanMTU", `1400`)
		f.Spec.VXLANEnabled = ptr(true)
		a.fold(felixUpdate(f, false))
		dev := a.overlay.Desired().V4.Device
		if dev.MTU != tc.mtu || dev.VNI != tc.vni {
			t.Errorf("env %+v: device MTU %d VNI %d, want %d %d", tc.env.VXLANMTU, dev.MTU, dev.VNI, tc.mtu, tc.vni)
		}
		cur := a.settings.Current()
		in := node.MTUInputs{Links: []node.LinkMTU{{Name: "eth0", MTU: 1500, Up: true}}, Pattern: regexp.MustCompile("^eth"), Encaps: node.Encaps{VXLAN: true},
			Settings: node.MTUFromSpec(0, cur)}
		eff, _ := config.Effective(tc.env, nil, f) // what node.MTUWatch computes from the same objects
		in2 := in
		in2.Settings = node.MTUFromSpec(0, eff)
		if got, got2 := node.PodMTU(in), node.PodMTU(in2); got != tc.podMTUWas || got2 != tc.podMTUWas {
			t.Errorf("env %+v: pod MTU %d (agent) %d (MTU watch), want %d", tc.env.VXLANMTU, got, got2, tc.podMTUWas)
		}
	}
}
