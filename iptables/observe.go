package iptables

// Op names a command a driver runs.
type Op string

// The commands the drivers run.
const (
	OpSave    Op = "save"    // iptables-save / ip6tables-save / ipset save
	OpRestore Op = "restore" // iptables-restore --noflush / ipset -exist restore
	// OpNetlink is the member adds and dels of existing sets an ipset
	// Apply writes over netlink instead of running ipset; Lines counts
	// the members written. No process runs.
	OpNetlink Op = "netlink"
)

// Exec describes one command a driver ran, for its owner's metrics.
type Exec struct {
	Op        Op
	IPSet     bool     // the ipset binary, not iptables
	IPVersion int      // 4 or 6 for iptables; 0 for ipset
	Table     string   // the iptables table; "" for ipset
	Lines     int      // input lines fed to a restore; members written for OpNetlink
	Cmd       string   // the binary run
	Args      []string // its arguments
	Err       error    // the command's failure, nil on success
}

// Observer is told of every command a driver runs (and of every batch of
// ipset member changes written over netlink), after it ends. It is
// called on the driver's goroutine, so it must be cheap and not block; nil
// means nothing is told. The drivers stay free of any metrics library.
type Observer func(Exec)

func (o Observer) tell(e Exec) {
	if o != nil {
		o(e)
	}
}
