package cni

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/containernetworking/cni/pkg/ns"
	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/utils"
	cniversion "github.com/containernetworking/cni/pkg/version"

	"github.com/calico-aio/calico-aio/ipam"
	"github.com/calico-aio/calico-aio/store"
	"github.com/calico-aio/calico-aio/store/apiconfig"
)

// Agent runs CNI calls inside calico-node with its warm datastore client:
// the same verbs as the in-process plugins, under the same IPAM file lock.
// It serves only calls it can answer exactly as the in-process plugin
// would; for any other it says why not, and the caller runs in-process.
type Agent struct {
	Client *store.Client
	Node   string
	// Datastore is the agent's (calls resolving to another are not
	// served); nil is etcdv3 at store.DefaultEndpoint.
	Datastore *apiconfig.Config
	// Busy, when set, counts the calls in flight (busy.go) but for those
	// that wait for the agent's apply.
	Busy *Busy

	logs servedLogs // the netconfs' log_file_path (log.go)
	// hints: which blocks the node's next IPAM assignment reads with its
	// first round trip (ipam.BlockHints).
	hintsOnce sync.Once
	hints     *ipam.BlockHints
}

// AgentReply is the outcome of one call: what the plugin prints and its
// exit code, or NotMine naming why the agent did not run it.
type AgentReply struct {
	Stdout  []byte
	Exit    int
	NotMine string
}

// Serve runs one call of plugin ("calico" or "calico-ipam") with the
// caller's environment and stdin.
func (ag *Agent) Serve(name string, env []string, stdin []byte) AgentReply {
	getenv := envLookup(env)
	a, cmd, reason := ag.admit(name, getenv, stdin)
	if reason != "" {
		return AgentReply{NotMine: reason}
	}
	if !(name == "calico" && cmd == "ADD" && waitsForAgent(stdin)) {
		defer ag.Busy.Enter()()
	}
	var out bytes.Buffer
	// The agent's warm connection, with the in-process per-call timeout.
	ag.hintsOnce.Do(func() { ag.hints = ipam.NewBlockHints() })
	b := backend{out: &out, shared: ag.Client.WithTimeout(requestTimeout), getenv: getenv, hints: ag.hints}
	var funcs skel.CNIFuncs
	if name == "calico" {
		p := &plugin{b}
		funcs = skel.CNIFuncs{Add: p.add, Del: p.del, Check: p.check, GC: p.gc, Status: p.status}
	} else {
		p := &ipamPlugin{b}
		funcs = skel.CNIFuncs{Add: p.add, Del: p.del, Check: p.check, GC: p.gc, Status: p.status}
	}
	verb := map[string]func(*skel.CmdArgs) error{"ADD": funcs.Add, "DEL": funcs.Del, "CHECK": funcs.Check, "GC": funcs.GC, "STATUS": funcs.Status}[cmd]
	err := verb(a)
	defer func() { ag.logs.logServed(stdin, name, cmd, a.ContainerID, err) }()
	if err == nil && (cmd == "ADD" || cmd == "DEL") && !isTrue(getenv("CNI_NETNS_OVERRIDE")) {
		// As skel does, after the call: the pod's netns must not be ours.
		if same, nserr := ns.CheckNetNS(a.Netns); nserr != nil {
			err = nserr
		} else if same {
			err = types.NewError(types.ErrInvalidNetNS, "plugin's netns and netns from CNI_NETNS should not be the same", "")
		}
	}
	if err != nil {
		var e *types.Error
		if !errors.As(err, &e) {
			e = types.NewError(types.ErrInternal, err.Error(), "")
		}
		data, _ := json.MarshalIndent(e, "", "    ")
		return AgentReply{Stdout: data, Exit: 1}
	}
	return AgentReply{Stdout: out.Bytes()}
}

// admit decides whether the agent can run the call exactly as the
// in-process plugin would. Whatever the in-process plugin would refuse is
// left to it too, so that errors are printed by one code path.
func (ag *Agent) admit(plugin string, getenv func(string) string, stdin []byte) (*skel.CmdArgs, string, string) {
	cmd := getenv("CNI_COMMAND")
	if plugin != "calico" && plugin != "calico-ipam" {
		return nil, "", "plugin " + plugin + " is not served"
	}
	required := map[string][]string{
		"ADD": {"CNI_CONTAINERID", "CNI_NETNS", "CNI_IFNAME", "CNI_PATH"},
		"DEL": {"CNI_CONTAINERID", "CNI_IFNAME", "CNI_PATH"}, "CHECK": {"CNI_CONTAINERID", "CNI_NETNS", "CNI_IFNAME", "CNI_PATH"},
		"GC": {"CNI_PATH"}, "STATUS": {"CNI_PATH"},
	}
	need, ok := required[cmd]
	if !ok {
		return nil, "", "CNI_COMMAND " + cmd + " is not served"
	}
	for _, k := range need {
		if getenv(k) == "" {
			return nil, "", k + " is missing"
		}
	}
	if cmd == "ADD" || cmd == "DEL" || cmd == "CHECK" {
		if utils.ValidateContainerID(getenv("CNI_CONTAINERID")) != nil || utils.ValidateInterfaceName(getenv("CNI_IFNAME")) != nil {
			return nil, "", "CNI_CONTAINERID or CNI_IFNAME is invalid"
		}
	}
	if getenv(faultEnv) != "" {
		return nil, "", faultEnv + " is set"
	}
	if reason := versionRefusal(cmd, stdin); reason != "" {
		return nil, "", reason
	}
	conf, err := LoadNetConf(stdin)
	if err != nil || utils.ValidateNetworkName(conf.Name) != nil {
		return nil, "", "invalid netconf"
	}
	if plugin == "calico" && conf.IPAM.Type != "calico-ipam" {
		return nil, "", "IPAM is delegated to " + conf.IPAM.Type
	}
	if plugin == "calico" && conf.maxWait() > maxServedWait {
		return nil, "", "its waits (policy_setup_timeout_seconds, readiness_gates) may outlast the socket's reply timeout"
	}
	if reason := ag.sameDatastore(conf, getenv); reason != "" {
		return nil, "", reason
	}
	if node, err := conf.NodeName(); err != nil || node != ag.Node {
		return nil, "", "another node name than the agent's"
	}
	if kc := conf.Kubernetes.Kubeconfig; kc != "" {
		if _, err := os.Stat(kc); err != nil {
			return nil, "", "kubeconfig not readable by the agent"
		}
	}
	if nsPath := getenv("CNI_NETNS"); plugin == "calico" && nsPath != "" && cmd != "DEL" {
		if _, err := os.Stat(nsPath); err != nil {
			return nil, "", "network namespace not visible to the agent"
		}
	}
	return &skel.CmdArgs{
		ContainerID: getenv("CNI_CONTAINERID"), Netns: getenv("CNI_NETNS"), IfName: getenv("CNI_IFNAME"),
		Args: getenv("CNI_ARGS"), Path: getenv("CNI_PATH"), NetnsOverride: getenv("CNI_NETNS_OVERRIDE"), StdinData: stdin,
	}, cmd, ""
}

// versionRefusal is non-empty when skel would refuse the netconf's
// cniVersion for cmd.
func versionRefusal(cmd string, stdin []byte) string {
	v, err := (&cniversion.ConfigDecoder{}).Decode(stdin)
	if err != nil {
		return "cniVersion unreadable"
	}
	if (&cniversion.Reconciler{}).Check(v, Versions) != nil {
		return "cniVersion " + v + " not supported"
	}
	min := map[string]string{"CHECK": "0.4.0", "GC": "1.1.0", "STATUS": "1.1.0"}[cmd]
	if min != "" {
		if ok, err := cniversion.GreaterThanOrEqualTo(v, min); err != nil || !ok {
			return "cniVersion " + v + " does not allow " + cmd
		}
	}
	return ""
}

// sameDatastore is empty when the call's datastore (its netconf over the
// caller's environment) is the agent's, else why not.
func (ag *Agent) sameDatastore(conf *NetConf, getenv func(string) string) string {
	ds, err := conf.datastore(getenv)
	if err != nil {
		return "invalid datastore settings"
	}
	mine := ag.Datastore
	if mine == nil {
		mine = &apiconfig.Config{Type: apiconfig.EtcdV3, Etcd: store.Config{Endpoints: []string{store.DefaultEndpoint}}}
	}
	switch {
	case ds.Type != mine.Type:
		return "another datastore than the agent's (" + string(ds.Type) + ")"
	case ds.Type == apiconfig.Kubernetes && ds.Kube != mine.Kube:
		return "another Kubernetes API or credentials than the agent's"
	case ds.Type == apiconfig.EtcdV3 && (!sameEndpoints(ds.Etcd.Endpoints, mine.Etcd.Endpoints) ||
		ds.Etcd.CAFile != mine.Etcd.CAFile || ds.Etcd.CertFile != mine.Etcd.CertFile || ds.Etcd.KeyFile != mine.Etcd.KeyFile):
		return "another datastore than the agent's"
	}
	return ""
}

func sameEndpoints(conf, agent []string) bool {
	norm := func(l []string) []string {
		if len(l) == 0 {
			l = []string{store.DefaultEndpoint}
		}
		out := make([]string, 0, len(l))
		for _, e := range l {
			out = append(out, strings.TrimRight(strings.TrimSpace(e), "/"))
		}
		slices.Sort(out)
		return slices.Compact(out)
	}
	return slices.Equal(norm(conf), norm(agent))
}

func envLookup(env []string) func(string) string {
	m := make(map[string]string, len(env))
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return func(k string) string { return m[k] }
}

func isTrue(s string) bool { return strings.ToUpper(s) == "TRUE" || s == "1" }
