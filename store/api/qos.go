package api

import (
	"math"
	"strconv"
)

// QoSControls is projectcalico.org/v3 WorkloadEndpoint.spec.qosControls:
// limits on the traffic into (ingress) and out of (egress) a workload.
// Zero means no limit. Units are Calico's: bandwidth and peakrate in bits
// per second, burst in bits, minburst in bytes, packet rate in packets per
// second, packet burst in packets, connections as a count.
type QoSControls struct {
	IngressBandwidth      int64 `json:"ingressBandwidth,omitempty"`
	EgressBandwidth       int64 `json:"egressBandwidth,omitempty"`
	IngressBurst          int64 `json:"ingressBurst,omitempty"`
	EgressBurst           int64 `json:"egressBurst,omitempty"`
	IngressPeakrate       int64 `json:"ingressPeakrate,omitempty"`
	EgressPeakrate        int64 `json:"egressPeakrate,omitempty"`
	IngressMinburst       int64 `json:"ingressMinburst,omitempty"`
	EgressMinburst        int64 `json:"egressMinburst,omitempty"`
	IngressPacketRate     int64 `json:"ingressPacketRate,omitempty"`
	EgressPacketRate      int64 `json:"egressPacketRate,omitempty"`
	IngressPacketBurst    int64 `json:"ingressPacketBurst,omitempty"`
	EgressPacketBurst     int64 `json:"egressPacketBurst,omitempty"`
	IngressMaxConnections int64 `json:"ingressMaxConnections,omitempty"`
	EgressMaxConnections  int64 `json:"egressMaxConnections,omitempty"`
}

// QoSBound is the range Calico 3.32 accepts for one QoS quantity.
type QoSBound struct{ Min, Max int64 }

// Calico 3.32's bounds (its pod-annotation conversion) and defaults.
var (
	QoSBandwidthBounds   = QoSBound{1_000, 1_000_000_000_000_000} // 1k .. 1P bit/s
	QoSBurstBounds       = QoSBound{1_000, math.MaxUint32 * 8}    // 1k bit .. ~4Gi bytes in bits
	QoSPeakrateBounds    = QoSBound{1_010, 1_010_000_000_000_000} // 1.01k .. 1.01P bit/s
	QoSMinburstBounds    = QoSBound{1_000, 100_000_000}           // 1k .. 100M bytes
	QoSPacketRateBounds  = QoSBound{1, 10_000}                    // the limit match's XT_LIMIT_SCALE
	QoSPacketBurstBounds = QoSBound{1, 10_000}                    // packets
	QoSConnectionBounds  = QoSBound{1, math.MaxUint32}            // connlimit's uint32
	QoSDefaultBurst      = int64(4 << 30)                         // 4Gi bits (512Mi bytes), when bandwidth is set alone
	QoSDefaultPktBurst   = int64(5)                               // packets, when packet rate is set alone
)

// qosField is one member of QoSControls with its JSON name and bounds.
type qosField struct {
	name  string
	value int64
	bound QoSBound
}

func (q *QoSControls) fields() []qosField {
	return []qosField{
		{"ingressBandwidth", q.IngressBandwidth, QoSBandwidthBounds},
		{"egressBandwidth", q.EgressBandwidth, QoSBandwidthBounds},
		{"ingressBurst", q.IngressBurst, QoSBurstBounds},
		{"egressBurst", q.EgressBurst, QoSBurstBounds},
		{"ingressPeakrate", q.IngressPeakrate, QoSPeakrateBounds},
		{"egressPeakrate", q.EgressPeakrate, QoSPeakrateBounds},
		{"ingressMinburst", q.IngressMinburst, QoSMinburstBounds},
		{"egressMinburst", q.EgressMinburst, QoSMinburstBounds},
		{"ingressPacketRate", q.IngressPacketRate, QoSPacketRateBounds},
		{"egressPacketRate", q.EgressPacketRate, QoSPacketRateBounds},
		{"ingressPacketBurst", q.IngressPacketBurst, QoSPacketBurstBounds},
		{"egressPacketBurst", q.EgressPacketBurst, QoSPacketBurstBounds},
		{"ingressMaxConnections", q.IngressMaxConnections, QoSConnectionBounds},
		{"egressMaxConnections", q.EgressMaxConnections, QoSConnectionBounds},
	}
}

// QoSProblem is one member of QoSControls that cannot be honoured: Field
// is its JSON name ("ingressBurst").
type QoSProblem struct {
	Field string
	Value int64
	Msg   string
}

// Problems lists what is wrong with q: values out of Calico's bounds, and
// the dependencies Calico enforces (a burst needs its bandwidth, a
// peakrate must exceed its bandwidth, a minburst needs its peakrate, a
// packet burst needs its packet rate).
func (q *QoSControls) Problems() []QoSProblem {
	var out []QoSProblem
	for _, f := range q.fields() {
		if f.value != 0 && (f.value < f.bound.Min || f.value > f.bound.Max) {
			out = append(out, QoSProblem{f.name, f.value, "must be between " + strconv.FormatInt(f.bound.Min, 10) + " and " + strconv.FormatInt(f.bound.Max, 10)})
		}
	}
	for _, d := range []struct {
		dir                                     string
		bw, burst, peak, minburst, rate, pburst int64
	}{
		{"ingress", q.IngressBandwidth, q.IngressBurst, q.IngressPeakrate, q.IngressMinburst, q.IngressPacketRate, q.IngressPacketBurst},
		{"egress", q.EgressBandwidth, q.EgressBurst, q.EgressPeakrate, q.EgressMinburst, q.EgressPacketRate, q.EgressPacketBurst},
	} {
		if d.burst != 0 && d.bw == 0 {
			out = append(out, QoSProblem{d.dir + "Burst", d.burst, "needs " + d.dir + "Bandwidth"})
		}
		if d.peak != 0 && d.peak <= d.bw || d.peak != 0 && d.bw == 0 {
			out = append(out, QoSProblem{d.dir + "Peakrate", d.peak, "must be greater than " + d.dir + "Bandwidth, which must be set"})
		}
		if d.minburst != 0 && d.peak == 0 {
			out = append(out, QoSProblem{d.dir + "Minburst", d.minburst, "needs " + d.dir + "Peakrate"})
		}
		if d.pburst != 0 && d.rate == 0 {
			out = append(out, QoSProblem{d.dir + "PacketBurst", d.pburst, "needs " + d.dir + "PacketRate"})
		}
	}
	return out
}

// WithDefaults is q with Calico's defaults filled in: a bandwidth without
// a burst gets QoSDefaultBurst, a packet rate without a packet burst
// QoSDefaultPktBurst. (Minburst defaults to the interface MTU in the
// agent.) Nil stays nil.
func (q *QoSControls) WithDefaults() *QoSControls {
	if q == nil {
		return nil
	}
	c := *q
	if c.IngressBandwidth != 0 && c.IngressBurst == 0 {
		c.IngressBurst = QoSDefaultBurst
	}
	if c.EgressBandwidth != 0 && c.EgressBurst == 0 {
		c.EgressBurst = QoSDefaultBurst
	}
	if c.IngressPacketRate != 0 && c.IngressPacketBurst == 0 {
		c.IngressPacketBurst = QoSDefaultPktBurst
	}
	if c.EgressPacketRate != 0 && c.EgressPacketBurst == 0 {
		c.EgressPacketBurst = QoSDefaultPktBurst
	}
	return &c
}

// qos checks spec.qosControls.
func (f *fieldErrs) qos(path string, q *QoSControls) {
	if q == nil {
		return
	}
	for _, p := range q.Problems() {
		f.add(path+"."+p.Field, strconv.FormatInt(p.Value, 10), p.Msg)
	}
}
