package metrics

import (
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/calico-aio/calico-aio/cni"
	"github.com/calico-aio/calico-aio/ipam"
)

// ipamGauges are ours (Calico's felix has no IPAM series): this node's
// affine blocks, their addresses and those in use, and the CNI journal's
// backlog of deletes waiting for the datastore.
type ipamGauges struct {
	blocks, addresses, inUse *prometheus.GaugeVec // by ip_version
	journalDir               string
}

func newIPAMGauges(journalDir string) *ipamGauges {
	vec := func(name, help string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, []string{"ip_version"})
	}
	return &ipamGauges{journalDir: journalDir,
		blocks:    vec("calico_ipam_blocks", "IPAM blocks affine to this node."),
		addresses: vec("calico_ipam_block_addresses", "Addresses in the IPAM blocks affine to this node."),
		inUse:     vec("calico_ipam_allocations_in_use", "Allocated addresses in the IPAM blocks affine to this node."),
	}
}

func (g *ipamGauges) register(reg *prometheus.Registry) {
	reg.MustRegister(g.blocks, g.addresses, g.inUse, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "calico_cni_journal_pending",
		Help: "CNI deletes journaled while the datastore was unreachable and not yet replayed.",
	}, func() float64 {
		n, err := cni.JournalBacklog(g.journalDir)
		if err != nil {
			slog.Warn("reading CNI journal backlog", "err", err)
		}
		return float64(n)
	}))
}

// set counts the blocks affine to node.
func (g *ipamGauges) set(node string, blocks map[string]*ipam.Block) {
	var n, addrs, used [2]int
	for _, b := range blocks {
		p, err := b.Prefix()
		if err != nil || !b.AffineTo(node) {
			continue
		}
		i := 0
		if p.Addr().Is6() {
			i = 1
		}
		n[i]++
		addrs[i] += len(b.Allocations)
		used[i] += b.InUse()
	}
	for i, ver := range []string{"4", "6"} {
		g.blocks.WithLabelValues(ver).Set(float64(n[i]))
		g.addresses.WithLabelValues(ver).Set(float64(addrs[i]))
		g.inUse.WithLabelValues(ver).Set(float64(used[i]))
	}
}
