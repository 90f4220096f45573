package k8s

import (
	"net/netip"
	"slices"
	"strings"

	"github.com/calico-aio/calico-aio/store/api"
)

// Names and label prefixes Calico's kube-controllers use for the profiles
// that carry namespace and service account labels to endpoints.
const (
	NamespaceProfilePrefix      = "kns."
	ServiceAccountProfilePrefix = "ksa."
	// NamespaceLabelPrefix marks a namespace's labels among a profile's
	// labelsToApply; namespaceSelectors match them without the prefix.
	NamespaceLabelPrefix = "pcns."
	// ServiceAccountLabelPrefix marks a service account's labels.
	ServiceAccountLabelPrefix = "pcsa."
	// NameLabel carries the namespace's (service account's) own name, so
	// a selector can match it exactly.
	NameLabel = "projectcalico.org/name"
)

var profileKind, _ = api.LookupKind("Profile")

// NamespaceProfileName is "kns.<ns>".
func NamespaceProfileName(ns string) string { return NamespaceProfilePrefix + ns }

// ServiceAccountProfileName is "ksa.<ns>.<sa>"; an empty namespace is
// "default", as in Calico.
func ServiceAccountProfileName(ns, sa string) string {
	if ns == "" {
		ns = "default"
	}
	return ServiceAccountProfilePrefix + ns + "." + sa
}

// NamespaceToProfile is the profile "kns.<ns>" every pod of the namespace
// names: it applies the namespace's labels as "pcns.<key>" plus
// "pcns.projectcalico.org/name": <ns>, and allows all ingress and egress
// (policies, not the profile, restrict pods).
func NamespaceToProfile(ns Namespace) *api.Profile {
	p := profileKind.NewObject().(*api.Profile)
	p.Metadata.Name = NamespaceProfileName(ns.Metadata.Name)
	p.Spec.LabelsToApply = prefixLabels(NamespaceLabelPrefix, ns.Metadata.Labels, ns.Metadata.Name)
	p.Spec.Ingress = []api.Rule{{Action: api.ActionAllow}}
	p.Spec.Egress = []api.Rule{{Action: api.ActionAllow}}
	return p
}

// ServiceAccountToProfile is the profile "ksa.<ns>.<sa>" the service
// account's pods name: it applies the account's labels as "pcsa.<key>"
// plus "pcsa.projectcalico.org/name": <sa>, and has no rules.
func ServiceAccountToProfile(sa ServiceAccount) *api.Profile {
	p := profileKind.NewObject().(*api.Profile)
	p.Metadata.Name = ServiceAccountProfileName(sa.Metadata.Namespace, sa.Metadata.Name)
	p.Spec.LabelsToApply = prefixLabels(ServiceAccountLabelPrefix, sa.Metadata.Labels, sa.Metadata.Name)
	return p
}

// prefixLabels is labels with prefix added to each key, plus the name
// label. A pair that would not be a valid label after prefixing (a key
// prefix at the length limit, a service account name over 63 characters)
// is left out: Calico's own datastore never validates these profiles, ours
// does, and one unusual label should not cost the whole profile.
func prefixLabels(prefix string, labels map[string]string, name string) map[string]string {
	out := make(map[string]string, len(labels)+1)
	add := func(k, v string) {
		if api.ValidateLabels(map[string]string{k: v}) == nil {
			out[k] = v
		}
	}
	for k, v := range labels {
		add(prefix+k, v)
	}
	add(prefix+NameLabel, name)
	return out
}

// PodLabels are the labels of a pod's workload endpoint: the pod's own
// labels, then projectcalico.org/namespace, projectcalico.org/orchestrator
// ("k8s") and, when the pod names one that fits in a label value,
// projectcalico.org/serviceaccount. These three always come from the pod's
// spec, never from a same-named pod label, so a pod cannot claim another
// namespace or service account. The pod's labels are not modified.
func PodLabels(pod Pod) map[string]string {
	out := make(map[string]string, len(pod.Metadata.Labels)+3)
	for k, v := range pod.Metadata.Labels {
		out[k] = v
	}
	out[api.LabelNamespace] = pod.Metadata.Namespace
	out[api.LabelOrchestrator] = OrchestratorK8s
	if sa := pod.Spec.ServiceAccountName; sa != "" && len(sa) <= 63 {
		out[api.LabelServiceAccount] = sa
	} else {
		delete(out, api.LabelServiceAccount)
	}
	return out
}

// PodProfiles are the profiles a pod's endpoint names: its namespace's
// and, when it has one, its service account's.
func PodProfiles(pod Pod) []string {
	out := []string{NamespaceProfileName(pod.Metadata.Namespace)}
	if sa := pod.Spec.ServiceAccountName; sa != "" {
		out = append(out, ServiceAccountProfileName(pod.Metadata.Namespace, sa))
	}
	return out
}

// PodPorts are the endpoint ports of a pod, as Calico maps them: every
// container (and init container) port with a number and a name or a host
// port. The protocol is TCP when empty; ports of other protocols than TCP,
// UDP and SCTP are left out.
func PodPorts(pod Pod) []api.WorkloadEndpointPort {
	var out []api.WorkloadEndpointPort
	for _, c := range slices.Concat(pod.Spec.Containers, pod.Spec.InitContainers) {
		for _, cp := range c.Ports {
			if cp.ContainerPort <= 0 || cp.ContainerPort > 65535 || (cp.Name == "" && cp.HostPort == 0) {
				continue
			}
			proto := strings.ToUpper(cp.Protocol)
			switch proto {
			case "":
				proto = api.ProtocolTCP
			case api.ProtocolTCP, api.ProtocolUDP, api.ProtocolSCTP:
			default:
				continue
			}
			hostPort := uint16(0)
			if cp.HostPort > 0 && cp.HostPort <= 65535 {
				hostPort = uint16(cp.HostPort)
			}
			out = append(out, api.WorkloadEndpointPort{
				Name:     cp.Name,
				Protocol: api.ProtocolFromString(proto),
				Port:     uint16(cp.ContainerPort),
				HostPort: hostPort,
				HostIP:   cp.HostIP,
			})
		}
	}
	return out
}

// PodIPs are the pod's addresses from status.podIPs (status.podIP when
// that is empty), in canonical form, without duplicates or unparsable
// entries. A host-networked pod has none of its own: its status shows the
// node's addresses, which are not the pod's to claim, so the result is nil.
func PodIPs(pod Pod) []string {
	if pod.Spec.HostNetwork {
		return nil
	}
	raw := make([]string, 0, len(pod.Status.PodIPs)+1)
	for _, ip := range pod.Status.PodIPs {
		raw = append(raw, ip.IP)
	}
	if len(raw) == 0 && pod.Status.PodIP != "" {
		raw = append(raw, pod.Status.PodIP)
	}
	var out []string
	for _, s := range raw {
		a, err := netip.ParseAddr(strings.TrimSpace(s))
		if err != nil {
			continue
		}
		if s := a.Unmap().WithZone("").String(); !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}
