package ipam

import (
	"encoding/json"
	"fmt"
)

// Handle is the index from an owner to its addresses' blocks, stored at
// /calico/ipam/v2/handle/<id>: {"block":{"10.65.0.0/26":1},"deleted":false}.
type Handle struct {
	Block   map[string]int `json:"block"`
	Deleted bool           `json:"deleted"`
}

func parseHandle(id string, val []byte) (*Handle, error) {
	h := &Handle{}
	if err := json.Unmarshal(val, h); err != nil {
		return nil, fmt.Errorf("handle %s: %w", id, err)
	}
	if h.Block == nil {
		h.Block = map[string]int{}
	}
	return h, nil
}

// add changes the count of block cidr by n, dropping it at zero.
func (h *Handle) add(cidr string, n int) {
	h.Block[cidr] += n
	if h.Block[cidr] <= 0 {
		delete(h.Block, cidr)
	}
}

func (h *Handle) empty() bool { return len(h.Block) == 0 }
