package k8s

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/calico-aio/calico-aio/store/api"
)

// The pod annotations that set the endpoint's spec.qosControls, as in
// Calico 3.32. Values are Kubernetes quantities ("10M", "1Gi", "100").
// The kubernetes.io bandwidth annotations (the bandwidth plugin's) count
// too; Calico's own win when both are set.
const (
	annotK8sIngressBandwidth   = "kubernetes.io/ingress-bandwidth"
	annotK8sEgressBandwidth    = "kubernetes.io/egress-bandwidth"
	annotQoSIngressBandwidth   = "qos.projectcalico.org/ingressBandwidth"
	annotQoSEgressBandwidth    = "qos.projectcalico.org/egressBandwidth"
	annotQoSIngressBurst       = "qos.projectcalico.org/ingressBurst"
	annotQoSEgressBurst        = "qos.projectcalico.org/egressBurst"
	annotQoSIngressPeakrate    = "qos.projectcalico.org/ingressPeakrate"
	annotQoSEgressPeakrate     = "qos.projectcalico.org/egressPeakrate"
	annotQoSIngressMinburst    = "qos.projectcalico.org/ingressMinburst"
	annotQoSEgressMinburst     = "qos.projectcalico.org/egressMinburst"
	annotQoSIngressPacketRate  = "qos.projectcalico.org/ingressPacketRate"
	annotQoSEgressPacketRate   = "qos.projectcalico.org/egressPacketRate"
	annotQoSIngressPacketBurst = "qos.projectcalico.org/ingressPacketBurst"
	annotQoSEgressPacketBurst  = "qos.projectcalico.org/egressPacketBurst"
	annotQoSIngressMaxConns    = "qos.projectcalico.org/ingressMaxConnections"
	annotQoSEgressMaxConns     = "qos.projectcalico.org/egressMaxConnections"
	// annotQoSDSCP (Calico 3.32's DiffServ marking of egress traffic) is
	// not implemented: ADD refuses it rather than ignore it.
	annotQoSDSCP = "qos.projectcalico.org/dscp"
)

// qosAnnotation ties an annotation to the QoSControls member it sets and
// the member's JSON name (for naming the annotation in errors).
type qosAnnotation struct {
	key   string
	field string
	set   func(q *api.QoSControls, v int64)
}

// qosAnnotations in the order they apply: the kubernetes.io bandwidth ones
// first, so that Calico's override them.
var qosAnnotations = []qosAnnotation{
	{annotK8sIngressBandwidth, "ingressBandwidth", func(q *api.QoSControls, v int64) { q.IngressBandwidth = v }},
	{annotK8sEgressBandwidth, "egressBandwidth", func(q *api.QoSControls, v int64) { q.EgressBandwidth = v }},
	{annotQoSIngressBandwidth, "ingressBandwidth", func(q *api.QoSControls, v int64) { q.IngressBandwidth = v }},
	{annotQoSEgressBandwidth, "egressBandwidth", func(q *api.QoSControls, v int64) { q.EgressBandwidth = v }},
	{annotQoSIngressBurst, "ingressBurst", func(q *api.QoSControls, v int64) { q.IngressBurst = v }},
	{annotQoSEgressBurst, "egressBurst", func(q *api.QoSControls, v int64) { q.EgressBurst = v }},
	{annotQoSIngressPeakrate, "ingressPeakrate", func(q *api.QoSControls, v int64) { q.IngressPeakrate = v }},
	{annotQoSEgressPeakrate, "egressPeakrate", func(q *api.QoSControls, v int64) { q.EgressPeakrate = v }},
	{annotQoSIngressMinburst, "ingressMinburst", func(q *api.QoSControls, v int64) { q.IngressMinburst = v }},
	{annotQoSEgressMinburst, "egressMinburst", func(q *api.QoSControls, v int64) { q.EgressMinburst = v }},
	{annotQoSIngressPacketRate, "ingressPacketRate", func(q *api.QoSControls, v int64) { q.IngressPacketRate = v }},
	{annotQoSEgressPacketRate, "egressPacketRate", func(q *api.QoSControls, v int64) { q.EgressPacketRate = v }},
	{annotQoSIngressPacketBurst, "ingressPacketBurst", func(q *api.QoSControls, v int64) { q.IngressPacketBurst = v }},
	{annotQoSEgressPacketBurst, "egressPacketBurst", func(q *api.QoSControls, v int64) { q.EgressPacketBurst = v }},
	{annotQoSIngressMaxConns, "ingressMaxConnections", func(q *api.QoSControls, v int64) { q.IngressMaxConnections = v }},
	{annotQoSEgressMaxConns, "egressMaxConnections", func(q *api.QoSControls, v int64) { q.EgressMaxConnections = v }},
}

// QoSAnnotationError is a QoS annotation whose value is refused.
type QoSAnnotationError struct {
	Annotation string // "qos.projectcalico.org/ingressBandwidth"
	Msg        string
}

func (e *QoSAnnotationError) Error() string { return "annotation " + e.Annotation + ": " + e.Msg }

func qosBad(annot, format string, args ...any) error {
	return &QoSAnnotationError{Annotation: annot, Msg: fmt.Sprintf(format, args...)}
}

// PodQoS reads a pod's QoS annotations into its endpoint's qosControls,
// with Calico's defaults for burst and packet burst; nil when none is set.
// Where Calico logs a warning and clamps or drops a value (not a quantity,
// out of its bounds, a burst without its rate), the value is refused with
// a *QoSAnnotationError naming the annotation: a limit the user asked for
// is never silently changed. The CNI plugin applies it at ADD, the
// Kubernetes controller when the annotations change.
func PodQoS(an map[string]string) (*api.QoSControls, error) {
	if _, ok := an[annotQoSDSCP]; ok {
		return nil, qosBad(annotQoSDSCP, "DiffServ marking is not supported by this agent")
	}
	q := &api.QoSControls{}
	keyOf := map[string]string{} // member -> the annotation that set it
	for _, a := range qosAnnotations {
		v, ok := an[a.key]
		if !ok {
			continue
		}
		qty, err := resource.ParseQuantity(v)
		if err != nil {
			return nil, qosBad(a.key, "%q is not a quantity (such as 100, 10M, 1Gi)", v)
		}
		if qty.Sign() <= 0 {
			return nil, qosBad(a.key, "%q must be greater than zero", v)
		}
		a.set(q, qty.Value())
		keyOf[a.field] = a.key
	}
	if len(keyOf) == 0 {
		return nil, nil
	}
	if probs := q.Problems(); len(probs) > 0 {
		p := probs[0]
		return nil, qosBad(keyOf[p.Field], "%s", fmt.Sprintf("%s %s", p.Field, p.Msg))
	}
	return q.WithDefaults(), nil
}
