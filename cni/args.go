package cni

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/containernetworking/cni/pkg/types"
)

// Args are the CNI_ARGS we understand.
type Args struct {
	IgnoreUnknown bool
	IPs           []netip.Addr // IP=10.0.0.5[,fd00::5]
	PodNamespace  string       // K8S_POD_NAMESPACE
	PodName       string       // K8S_POD_NAME
	PodInfraID    string       // K8S_POD_INFRA_CONTAINER_ID
	PodUID        string       // K8S_POD_UID
}

// ParseArgs parses CNI_ARGS ("K1=V1;K2=V2"). Unknown keys are an error
// unless IgnoreUnknown is set, as the CNI spec says.
func ParseArgs(s string) (Args, error) {
	var a Args
	var unknown []string
	for _, kv := range strings.Split(s, ";") {
		if kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return a, types.NewError(types.ErrInvalidEnvironmentVariables, fmt.Sprintf("CNI_ARGS: %q is not KEY=VALUE", kv), "")
		}
		switch k {
		case "IgnoreUnknown":
			a.IgnoreUnknown = v == "1" || strings.EqualFold(v, "true")
		case "IP":
			for _, ip := range strings.Split(v, ",") {
				addr, err := netip.ParseAddr(strings.TrimSpace(ip))
				if err != nil {
					return a, types.NewError(types.ErrInvalidEnvironmentVariables, fmt.Sprintf("CNI_ARGS: IP=%q is not an IP address", ip), "")
				}
				a.IPs = append(a.IPs, addr.Unmap())
			}
		case "K8S_POD_NAMESPACE":
			a.PodNamespace = v
		case "K8S_POD_NAME":
			a.PodName = v
		case "K8S_POD_INFRA_CONTAINER_ID":
			a.PodInfraID = v
		case "K8S_POD_UID":
			a.PodUID = v
		default:
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 && !a.IgnoreUnknown {
		return a, types.NewError(types.ErrInvalidEnvironmentVariables, fmt.Sprintf("CNI_ARGS: unknown argument(s) %s (set IgnoreUnknown=1 to ignore)", strings.Join(unknown, ", ")), "")
	}
	return a, nil
}
