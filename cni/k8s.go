package cni

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/calico-aio/calico-aio/k8s"
	"github.com/calico-aio/calico-aio/store/api"
	"github.com/calico-aio/calico-aio/store/apiconfig"
)

// The pod annotations Calico's CNI plugin honours.
const (
	annotIPAddrs        = "cni.projectcalico.org/ipAddrs"
	annotIPAddrsNoIpam  = "cni.projectcalico.org/ipAddrsNoIpam"
	annotIPv4Pools      = "cni.projectcalico.org/ipv4pools"
	annotIPv6Pools      = "cni.projectcalico.org/ipv6pools"
	annotFloatingIPs    = k8s.AnnotFloatingIPs
	annotHwAddr         = "cni.projectcalico.org/hwAddr"
	annotSourcePrefixes = k8s.AnnotAllowedSourcePrefixes
)

// The ipam.subnet values that host-local gets replaced by the node's pod CIDR.
const (
	usePodCIDR     = "usePodCidr"
	usePodCIDRIPv6 = "usePodCidrIPv6"
)

// kubePod is what ADD learns about a Kubernetes pod from the API. It is read
// and checked before anything is allocated, so a missing pod, an unreachable
// API or a bad annotation leaves nothing behind.
type kubePod struct {
	kube *k8s.Client
	pod  k8s.Pod
	ns   k8s.Namespace

	ipAddrs        []netip.Addr     // ipAddrs: these addresses, through IPAM
	noIPAM         []netip.Addr     // ipAddrsNoIpam: these addresses, no IPAM
	pools4, pools6 []string         // ipv4pools/ipv6pools (pod, else namespace); nil: the netconf's
	floating       []netip.Addr     // floatingIPs: NAT'ed to the pod's address of the same family
	mac            net.HardwareAddr // hwAddr: the pod interface's MAC
	spoofable      []string         // allowedSourcePrefixes: masked CIDRs the pod may send from
	qos            *api.QoSControls // qos.projectcalico.org/*: the endpoint's qosControls (qos.go)

	ipamStdin []byte // the delegated IPAM's netconf with usePodCidr replaced; nil: unchanged
}

// usesKubernetes: Kubernetes pod arguments, and a way to the API (the
// Kubernetes datastore, a kubeconfig or API root in the netconf, or policy
// type k8s).
func (s *session) usesKubernetes(id identity) bool {
	c := s.conf
	return id.orchestrator == OrchestratorK8s && (s.kdd() ||
		c.Kubernetes.Kubeconfig != "" || c.Kubernetes.K8sAPIRoot != "" || c.Policy.K8sAPIRoot != "" || c.Policy.Type == "k8s")
}

// kubeClient is the Kubernetes client of the datastore settings (the
// netconf's kubernetes and policy keys over the environment, as
// apiconfig resolves them); with none naming the API, the usual
// kubeconfig rules ($KUBECONFIG, ~/.kube/config, in-cluster).
func (s *session) kubeClient() (*k8s.Client, error) {
	cfg, err := s.ds.RESTConfig(apiconfig.OSHost())
	if errors.Is(err, apiconfig.ErrNoKubernetesAPI) {
		return k8s.NewClient("")
	}
	if err != nil {
		return nil, err
	}
	return k8s.NewClientFromConfig(cfg)
}

// kubeError is a CNI error about a read from the Kubernetes API (err names
// the object): try again later when the API is unreachable, internal
// otherwise. about, when set, says what the object was needed for.
func kubeError(err error, about string) error {
	code := uint(types.ErrInternal)
	if errors.Is(err, k8s.ErrUnreachable) {
		code = types.ErrTryAgainLater
	}
	msg := err.Error()
	if errors.Is(err, k8s.ErrNotFound) {
		msg += " in the Kubernetes API"
	}
	if about != "" {
		msg += " (" + about + ")"
	}
	return types.NewError(code, msg, "")
}

// readKubePod reads the pod, its namespace and (for usePodCidr) the node,
// and checks the pod's annotations against the netconf.
func (s *session) readKubePod(ctx context.Context, stdin []byte, id identity) (*kubePod, error) {
	kc, err := s.kubeClient()
	if err != nil {
		return nil, types.NewError(types.ErrInvalidNetworkConfig, "invalid network config: "+err.Error(), "")
	}
	// The two reads are independent: one round trip instead of two (they
	// share the connection). The pod's error, when both fail, is the one
	// reported.
	var ns *k8s.Namespace
	nsErr := make(chan error, 1)
	go func() {
		var err error
		ns, err = kc.GetNamespace(ctx, id.namespace)
		nsErr <- err
	}()
	pod, err := kc.GetPod(ctx, id.namespace, id.pod)
	if err2 := <-nsErr; err == nil && err2 != nil {
		return nil, kubeError(err2, "the namespace of pod "+id.namespace+"/"+id.pod)
	}
	if err != nil {
		return nil, kubeError(err, "")
	}
	kp, err := parseKubePod(s.conf, *pod, *ns)
	if err != nil {
		return nil, err
	}
	kp.kube = kc
	if s.conf.IPAM.Type == "host-local" {
		kp.ipamStdin, err = replacePodCIDR(stdin, func() (k8s.NodeSpec, error) {
			n, err := kc.GetNode(ctx, s.node)
			if err != nil {
				return k8s.NodeSpec{}, kubeError(err, "for its pod CIDR, as ipam.subnet says")
			}
			return n.Spec, nil
		})
		if err != nil {
			return nil, err
		}
	}
	return kp, nil
}

// parseKubePod reads the pod's network annotations (and its namespace's
// pool annotations) as Calico does, refusing what the netconf does not
// allow. It does no I/O.
func parseKubePod(conf *NetConf, pod k8s.Pod, ns k8s.Namespace) (*kubePod, error) {
	kp := &kubePod{pod: pod, ns: ns}
	an := pod.Metadata.Annotations
	bad := func(annot, format string, args ...any) error {
		return types.NewError(types.ErrInvalidNetworkConfig,
			fmt.Sprintf("pod %s/%s: annotation %s: %s", pod.Metadata.Namespace, pod.Metadata.Name, annot, fmt.Sprintf(format, args...)), "")
	}
	calicoIPAM := conf.IPAM.Type == "calico-ipam"
	ipAddrs, noIPAM := an[annotIPAddrs], an[annotIPAddrsNoIpam]
	var err error
	switch {
	case ipAddrs != "" && noIPAM != "":
		return nil, bad(annotIPAddrs, "cannot be used together with %s", annotIPAddrsNoIpam)
	case noIPAM != "":
		if !calicoIPAM {
			return nil, bad(annotIPAddrsNoIpam, "is not compatible with the configured IPAM %s", conf.IPAM.Type)
		}
		if !conf.FeatureControl.IPAddrsNoIpam {
			return nil, bad(annotIPAddrsNoIpam, "requested feature is not enabled: set feature_control.ip_addrs_no_ipam")
		}
		if kp.noIPAM, err = parsePodAddrs(noIPAM); err != nil {
			return nil, bad(annotIPAddrsNoIpam, "%v", err)
		}
	case ipAddrs != "":
		if !calicoIPAM {
			return nil, bad(annotIPAddrs, "is not compatible with the configured IPAM %s", conf.IPAM.Type)
		}
		if kp.ipAddrs, err = parsePodAddrs(ipAddrs); err != nil {
			return nil, bad(annotIPAddrs, "%v", err)
		}
	}
	if calicoIPAM {
		for _, p := range []struct {
			annot string
			out   *[]string
		}{{annotIPv4Pools, &kp.pools4}, {annotIPv6Pools, &kp.pools6}} {
			where, v := "pod "+pod.Metadata.Namespace+"/"+pod.Metadata.Name, an[p.annot]
			if v == "" {
				where, v = "namespace "+ns.Metadata.Name, ns.Metadata.Annotations[p.annot]
			}
			if v == "" {
				continue
			}
			if *p.out, err = parseStringList(v); err != nil {
				return nil, types.NewError(types.ErrInvalidNetworkConfig,
					fmt.Sprintf("%s: annotation %s: %v", where, p.annot, err), "")
			}
		}
	}
	if v := an[annotFloatingIPs]; v != "" {
		if !conf.FeatureControl.FloatingIPs {
			return nil, bad(annotFloatingIPs, "requested feature is not enabled: set feature_control.floating_ips")
		}
		if kp.floating, err = parseAddrList(v); err != nil {
			return nil, bad(annotFloatingIPs, "%v", err)
		}
	}
	if v := an[annotHwAddr]; v != "" {
		mac, err := net.ParseMAC(strings.TrimSpace(v))
		switch {
		case err != nil:
			return nil, bad(annotHwAddr, "%q is not a MAC address", v)
		case len(mac) != 6:
			return nil, bad(annotHwAddr, "%q is not a 6-byte Ethernet MAC address", v)
		case mac[0]&1 != 0:
			return nil, bad(annotHwAddr, "%s is a multicast address", mac)
		}
		kp.mac = mac
	}
	if v := an[annotSourcePrefixes]; v != "" {
		if kp.spoofable, err = k8s.SourcePrefixes(v); err != nil {
			return nil, bad(annotSourcePrefixes, "%v", err)
		}
	}
	if kp.qos, err = k8s.PodQoS(an); err != nil {
		var qe *k8s.QoSAnnotationError
		if errors.As(err, &qe) {
			return nil, bad(qe.Annotation, "%s", qe.Msg)
		}
		return nil, err
	}
	return kp, nil
}

// parseStringList parses a JSON list of non-empty strings, at least one.
func parseStringList(v string) ([]string, error) {
	out, err := k8s.StringList(v)
	if err == nil && len(out) == 0 {
		err = fmt.Errorf("%q is an empty list", v)
	}
	return out, err
}

// parseAddrList parses a JSON list of IP addresses, at least one.
func parseAddrList(v string) ([]netip.Addr, error) {
	if _, err := parseStringList(v); err != nil {
		return nil, err
	}
	return k8s.AddrList(v)
}

// parsePodAddrs parses a pod's own addresses: a JSON list with at most one
// IPv4 and one IPv6 address.
func parsePodAddrs(v string) ([]netip.Addr, error) {
	addrs, err := parseAddrList(v)
	if err != nil {
		return nil, err
	}
	var n4, n6 int
	for _, a := range addrs {
		if a.Is4() {
			n4++
		} else {
			n6++
		}
	}
	if n4 > 1 || n6 > 1 {
		return nil, fmt.Errorf("%q: at most one IPv4 and one IPv6 address", v)
	}
	return addrs, nil
}

// ipNATs maps each floating IP to the pod's address of its family; one of
// a family the pod has none of is refused.
func (kp *kubePod) ipNATs(addrs []netip.Addr) ([]api.IPNAT, error) {
	nats, unmatched := k8s.FloatingIPNATs(kp.floating, addrs)
	if len(unmatched) > 0 {
		return nil, types.NewError(types.ErrInvalidNetworkConfig,
			fmt.Sprintf("pod %s/%s: annotation %s: the pod has no address of the family of %s", kp.pod.Metadata.Namespace, kp.pod.Metadata.Name, annotFloatingIPs, unmatched[0]), "")
	}
	return nats, nil
}

// ipamInputs are the netconf and CNI_ARGS calico-ipam allocates with: the
// pod's pool and address annotations override the netconf's pools and
// CNI_ARGS IP=.
func (kp *kubePod) ipamInputs(conf *NetConf, args Args) (*NetConf, Args) {
	if kp == nil {
		return conf, args
	}
	c := *conf
	if kp.pools4 != nil {
		c.IPAM.IPv4Pools = kp.pools4
	}
	if kp.pools6 != nil {
		c.IPAM.IPv6Pools = kp.pools6
	}
	if kp.ipAddrs != nil {
		args.IPs = kp.ipAddrs
	}
	return &c, args
}

// applyTo fills in the endpoint what the pod says: labels, service
// account, ports, NAT for floating IPs, the source prefixes it may
// send from (which the agent honours only with workloadSourceSpoofing Any)
// and its QoS controls.
func (kp *kubePod) applyTo(w *api.WorkloadEndpoint, addrs []netip.Addr) error {
	nats, err := kp.ipNATs(addrs)
	if err != nil {
		return err
	}
	w.Metadata.Labels = k8s.PodLabels(kp.pod)
	w.Spec.ServiceAccountName = kp.pod.Spec.ServiceAccountName
	w.Spec.Ports = k8s.PodPorts(kp.pod)
	w.Spec.IPNATs = nats
	w.Spec.AllowSpoofedSourcePrefixes = kp.spoofable
	w.Spec.QoSControls = kp.qos
	return nil
}

// ensureKubeProfiles creates the pod's kns.<ns> and ksa.<ns>.<sa> profiles
// when they are missing (existing ones are the agent's to keep in step with
// the API). The service account is read only for a missing profile; when
// that read fails the profile gets just the account's name label.
func (s *session) ensureKubeProfiles(ctx context.Context, kp *kubePod) error {
	nsProfile := k8s.NamespaceToProfile(kp.ns)
	if err := ensureProfileWith(ctx, s.cl, nsProfile.Metadata.Name, func() *api.Profile { return nsProfile }); err != nil {
		return types.NewError(types.ErrTryAgainLater, "creating profile "+nsProfile.Metadata.Name, err.Error())
	}
	saName := kp.pod.Spec.ServiceAccountName
	if saName == "" {
		return nil
	}
	name := k8s.ServiceAccountProfileName(kp.pod.Metadata.Namespace, saName)
	err := ensureProfileWith(ctx, s.cl, name, func() *api.Profile {
		sa := k8s.ServiceAccount{Metadata: k8s.ObjectMeta{Name: saName, Namespace: kp.pod.Metadata.Namespace}}
		if got, err := kp.kube.GetServiceAccount(ctx, sa.Metadata.Namespace, saName); err == nil {
			sa = *got
		} else {
			slog.Warn("service account unreadable; its profile gets only the name label", "profile", name, "err", err)
		}
		return k8s.ServiceAccountToProfile(sa)
	})
	if err != nil {
		return types.NewError(types.ErrTryAgainLater, "creating profile "+name, err.Error())
	}
	return nil
}

// replacePodCIDR replaces usePodCidr (usePodCidrIPv6) in a host-local IPAM
// section's subnet and ranges with the node's IPv4 (IPv6) pod CIDR. It
// returns nil when the netconf uses neither; node is called at most once.
func replacePodCIDR(stdin []byte, node func() (k8s.NodeSpec, error)) ([]byte, error) {
	var spec *k8s.NodeSpec
	return rewriteHostLocalSubnets(stdin, func(v string) (string, error) {
		if spec == nil {
			got, err := node()
			if err != nil {
				return "", err
			}
			spec = &got
		}
		return podCIDROf(*spec, v == usePodCIDRIPv6)
	})
}

// podCIDROf picks the node's pod CIDR of a family.
func podCIDROf(spec k8s.NodeSpec, v6 bool) (string, error) {
	cidrs := spec.PodCIDRs
	if len(cidrs) == 0 && spec.PodCIDR != "" {
		cidrs = []string{spec.PodCIDR}
	}
	for _, c := range cidrs {
		if p, err := netip.ParsePrefix(c); err == nil && p.Addr().Is6() == v6 {
			return p.Masked().String(), nil
		}
	}
	fam := "IPv4"
	if v6 {
		fam = "IPv6"
	}
	return "", types.NewError(types.ErrInvalidNetworkConfig, fmt.Sprintf("ipam.subnet: the node has no %s spec.podCIDR (podCIDRs %v)", fam, cidrs), "")
}

// rewriteHostLocalSubnets replaces each usePodCidr/usePodCidrIPv6 subnet of
// the ipam section (subnet, ranges[][].subnet) with repl(value), keeping
// every other field. It returns nil when there is none; repl's answer is
// reused for a repeated value.
func rewriteHostLocalSubnets(stdin []byte, repl func(string) (string, error)) ([]byte, error) {
	var conf map[string]any
	dec := json.NewDecoder(bytes.NewReader(stdin))
	dec.UseNumber() // numbers pass through as written
	if err := dec.Decode(&conf); err != nil {
		return nil, ConfigError("(document)", "%v", err)
	}
	ipamSec, _ := conf["ipam"].(map[string]any)
	if ipamSec == nil {
		return nil, nil
	}
	seen := map[string]string{}
	changed := false
	fix := func(m map[string]any) error {
		v, _ := m["subnet"].(string)
		if v != usePodCIDR && v != usePodCIDRIPv6 {
			return nil
		}
		if _, ok := seen[v]; !ok {
			r, err := repl(v)
			if err != nil {
				return err
			}
			seen[v] = r
		}
		m["subnet"], changed = seen[v], true
		return nil
	}
	if err := fix(ipamSec); err != nil {
		return nil, err
	}
	ranges, _ := ipamSec["ranges"].([]any)
	for _, set := range ranges {
		rs, _ := set.([]any)
		for _, r := range rs {
			if m, ok := r.(map[string]any); ok {
				if err := fix(m); err != nil {
					return nil, err
				}
			}
		}
	}
	if !changed {
		return nil, nil
	}
	out, err := json.Marshal(conf)
	if err != nil {
		return nil, types.NewError(types.ErrInternal, "re-encoding the IPAM netconf", err.Error())
	}
	return out, nil
}

// delIPAMStdin is the netconf DEL passes to a delegated host-local: its
// usePodCidr subnets replaced by a placeholder so host-local can parse it
// (host-local releases by container ID, whatever the range), without asking
// the API.
func delIPAMStdin(conf *NetConf, stdin []byte) []byte {
	if conf.IPAM.Type != "host-local" {
		return stdin
	}
	out, err := rewriteHostLocalSubnets(stdin, func(v string) (string, error) {
		if v == usePodCIDRIPv6 {
			return "::/0", nil
		}
		return "0.0.0.0/0", nil
	})
	if err != nil || out == nil {
		return stdin
	}
	return out
}

// checkPodCIDRWithoutAPI refuses usePodCidr when the plugin cannot ask the
// API for the node's pod CIDR.
func checkPodCIDRWithoutAPI(conf *NetConf, stdin []byte) error {
	if conf.IPAM.Type != "host-local" {
		return nil
	}
	_, err := rewriteHostLocalSubnets(stdin, func(v string) (string, error) {
		return "", ConfigError("ipam.subnet", "%s needs the Kubernetes API: set kubernetes.kubeconfig (or policy.type k8s) and pass K8S_POD_NAMESPACE/K8S_POD_NAME", v)
	})
	return err
}
