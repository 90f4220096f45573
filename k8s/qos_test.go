package k8s

import (
	"errors"
	"strings"
	"testing"

	"github.com/calico-aio/calico-aio/store/api"
)

func TestParseQoSAnnotations(t *testing.T) {
	cases := []struct {
		name string
		an   map[string]string
		want *api.QoSControls
	}{
		{"none", map[string]string{"other": "1"}, nil},
		{"bandwidth gets Calico's default burst", map[string]string{annotQoSIngressBandwidth: "10M"},
			&api.QoSControls{IngressBandwidth: 10_000_000, IngressBurst: 4 << 30}},
		{"every annotation, quantities as Kubernetes writes them", map[string]string{
			annotQoSIngressBandwidth: "10M", annotQoSEgressBandwidth: "1Gi", annotQoSIngressBurst: "200k", annotQoSEgressBurst: "8Mi",
			annotQoSIngressPeakrate: "20M", annotQoSEgressPeakrate: "2.5Gi", annotQoSIngressMinburst: "1500", annotQoSEgressMinburst: "3k",
			annotQoSIngressPacketRate: "100", annotQoSEgressPacketRate: "10k", annotQoSIngressPacketBurst: "200", annotQoSEgressPacketBurst: "1e3",
			annotQoSIngressMaxConns: "10", annotQoSEgressMaxConns: "4294967295",
		}, &api.QoSControls{
			IngressBandwidth: 10_000_000, EgressBandwidth: 1 << 30, IngressBurst: 200_000, EgressBurst: 8 << 20,
			IngressPeakrate: 20_000_000, EgressPeakrate: 2.5 * (1 << 30), IngressMinburst: 1500, EgressMinburst: 3000,
			IngressPacketRate: 100, EgressPacketRate: 10_000, IngressPacketBurst: 200, EgressPacketBurst: 1000,
			IngressMaxConnections: 10, EgressMaxConnections: 4294967295,
		}},
		{"packet rate gets the default packet burst", map[string]string{annotQoSEgressPacketRate: "50"},
			&api.QoSControls{EgressPacketRate: 50, EgressPacketBurst: 5}},
		{"kubernetes.io bandwidth", map[string]string{annotK8sIngressBandwidth: "1M", annotK8sEgressBandwidth: "2M"},
			&api.QoSControls{IngressBandwidth: 1_000_000, EgressBandwidth: 2_000_000, IngressBurst: 4 << 30, EgressBurst: 4 << 30}},
		{"Calico's annotation wins over kubernetes.io's", map[string]string{annotK8sIngressBandwidth: "1M", annotQoSIngressBandwidth: "3M"},
			&api.QoSControls{IngressBandwidth: 3_000_000, IngressBurst: 4 << 30}},
		{"connections alone", map[string]string{annotQoSIngressMaxConns: "1"}, &api.QoSControls{IngressMaxConnections: 1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := PodQoS(c.an)
			if err != nil {
				t.Fatal(err)
			}
			if (got == nil) != (c.want == nil) || got != nil && *got != *c.want {
				t.Errorf("got %+v, want %+v", got, c.want)
			}
		})
	}
}

func TestParseQoSAnnotationsRefuses(t *testing.T) {
	cases := []struct {
		name, key, value string
		extra            map[string]string
		want             string
	}{
		{"not a quantity", annotQoSIngressBandwidth, "10 Mbit", nil, "is not a quantity"},
		{"zero", annotQoSEgressPacketRate, "0", nil, "greater than zero"},
		{"negative", annotQoSIngressMaxConns, "-1", nil, "greater than zero"},
		{"bandwidth below 1k", annotQoSIngressBandwidth, "999", nil, "ingressBandwidth must be between 1000 and 1000000000000000"},
		{"bandwidth above 1P", annotK8sEgressBandwidth, "2P", nil, "egressBandwidth must be between"},
		{"burst above ~4Gi bytes", annotQoSEgressBurst, "40Gi", map[string]string{annotQoSEgressBandwidth: "1M"}, "egressBurst must be between"},
		{"packet rate above 10k", annotQoSIngressPacketRate, "10001", nil, "ingressPacketRate must be between 1 and 10000"},
		{"packet burst above 10k", annotQoSIngressPacketBurst, "20k", map[string]string{annotQoSIngressPacketRate: "1"}, "ingressPacketBurst must be between"},
		{"connections above uint32", annotQoSEgressMaxConns, "4294967296", nil, "egressMaxConnections must be between"},
		{"minburst above 100M", annotQoSIngressMinburst, "101M", map[string]string{annotQoSIngressBandwidth: "1M", annotQoSIngressPeakrate: "2M"}, "ingressMinburst must be between"},
		{"burst without bandwidth", annotQoSIngressBurst, "1M", nil, "ingressBurst needs ingressBandwidth"},
		{"peakrate without bandwidth", annotQoSEgressPeakrate, "2M", nil, "egressPeakrate must be greater than egressBandwidth"},
		{"peakrate not above bandwidth", annotQoSIngressPeakrate, "1M", map[string]string{annotQoSIngressBandwidth: "1M"}, "ingressPeakrate must be greater than ingressBandwidth"},
		{"minburst without peakrate", annotQoSEgressMinburst, "3000", map[string]string{annotQoSEgressBandwidth: "1M"}, "egressMinburst needs egressPeakrate"},
		{"packet burst without packet rate", annotQoSEgressPacketBurst, "10", nil, "egressPacketBurst needs egressPacketRate"},
		{"DSCP, not implemented", annotQoSDSCP, "AF21", nil, "DiffServ marking is not supported by this agent"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			an := map[string]string{c.key: c.value}
			for k, v := range c.extra {
				an[k] = v
			}
			_, err := PodQoS(an)
			var qe *QoSAnnotationError
			if !errors.As(err, &qe) || qe.Annotation != c.key || !strings.Contains(qe.Msg, c.want) {
				t.Errorf("got %v, want annotation %s refused saying %q", err, c.key, c.want)
			}
		})
	}
}
