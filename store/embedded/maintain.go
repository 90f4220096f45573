package embedded

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// Storage upkeep of the member. etcd keeps every revision until it is
// compacted, and a compacted database file does not shrink until it is
// defragmented; the quota counts the file. So:
//
//   - Compaction is etcd's own periodic auto-compaction (as
//     `--auto-compaction-mode=periodic --auto-compaction-retention=5m`, the
//     history kube-apiserver keeps): live data plus five minutes of churn.
//   - Defragmentation rewrites the file and blocks the member while it runs
//     (about a second per hundred MB), so it is rare and bounded: checked
//     every DefragCheckInterval (default hourly) and done only when
//     (a) at least DefragMinFreeBytes (default 64 MiB) and at least half of
//     the file is free, or
//     (b) the NOSPACE alarm is raised: the file is defragmented (as an
//     operator would run `etcdctl defrag`) and, when what is left fits in
//     disarmFraction of the quota, the alarm is disarmed. The size after
//     defragmentation is exact; the in-use figure before it is not (bbolt
//     frees pages only at a later commit, and a member refusing writes
//     may see none). Live data above that keeps the alarm raised: writes
//     stay refused and readiness says why.
const (
	DefaultCompactionRetention = 5 * time.Minute
	DefaultQuotaBackendBytes   = int64(2 << 30) // etcd's own default, set explicitly
	DefaultDefragCheckInterval = time.Hour
	DefaultDefragMinFreeBytes  = int64(64 << 20)
)

// disarmFraction (num/den) of the quota is the most live data at which a
// NOSPACE alarm is cleared after a defragmentation.
const disarmNum, disarmDen = 8, 10

// AlarmNoSpace is the name of etcd's quota alarm.
const AlarmNoSpace = "NOSPACE"

func (c *Config) setUpkeepDefaults() error {
	if c.QuotaBackendBytes < 0 {
		return fmt.Errorf("embedded etcd QuotaBackendBytes %d: must not be negative", c.QuotaBackendBytes)
	}
	if c.DefragMinFreeBytes < 0 {
		return fmt.Errorf("embedded etcd DefragMinFreeBytes %d: must not be negative", c.DefragMinFreeBytes)
	}
	if c.CompactionRetention == 0 {
		c.CompactionRetention = DefaultCompactionRetention
	}
	if c.QuotaBackendBytes == 0 {
		c.QuotaBackendBytes = DefaultQuotaBackendBytes
	}
	if c.DefragCheckInterval == 0 {
		c.DefragCheckInterval = DefaultDefragCheckInterval
	}
	if c.DefragMinFreeBytes == 0 {
		c.DefragMinFreeBytes = DefaultDefragMinFreeBytes
	}
	return nil
}

// Status is a point-in-time view of the member's storage.
type Status struct {
	DBSize      int64    // bytes of the database file: what the quota counts
	DBSizeInUse int64    // bytes holding data; the rest is free pages
	Quota       int64    // QuotaBackendBytes in force
	Alarms      []string // raised alarms, e.g. AlarmNoSpace, "CORRUPT"
	Defrags     uint64   // defragmentations done since Start
}

// Alarm reports whether the named alarm is raised.
func (st Status) Alarm(name string) bool {
	for _, a := range st.Alarms {
		if a == name {
			return true
		}
	}
	return false
}

// Alarms lists the raised alarms; it reads the member's alarm store and
// never waits for the backend.
func (s *Server) Alarms() []string {
	var out []string
	for _, a := range s.etcd.Server.Alarms() {
		out = append(out, a.Alarm.String())
	}
	return out
}

// Status reads the member's storage sizes and alarms. It waits while a
// defragmentation runs.
func (s *Server) Status() Status {
	be := s.etcd.Server.Backend()
	return Status{DBSize: be.Size(), DBSizeInUse: be.SizeInUse(), Quota: s.upkeep.quota,
		Alarms: s.Alarms(), Defrags: s.upkeep.defrags.Load()}
}

// upkeep is the defragmentation loop's state.
type upkeep struct {
	quota, minFree int64
	defrags        atomic.Uint64
	cancel         context.CancelFunc
	done           chan struct{}
	once           sync.Once
}

// decision is what one check of the rule decides: defragment, and then
// disarm NOSPACE if the defragmented file fits.
type decision struct{ defrag, disarm bool }

// decide applies the rule in the package comment to one Status.
func decide(st Status, minFree int64) decision {
	if st.Alarm(AlarmNoSpace) {
		return decision{defrag: true, disarm: true}
	}
	free := st.DBSize - st.DBSizeInUse
	return decision{defrag: free >= minFree && 2*free >= st.DBSize}
}

func (s *Server) startUpkeep(every time.Duration) {
	ctx, cancel := context.WithCancel(context.Background())
	s.upkeep.cancel, s.upkeep.done = cancel, make(chan struct{})
	if every < 0 {
		close(s.upkeep.done)
		return
	}
	go func() {
		defer close(s.upkeep.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if err := s.maintain(ctx); err != nil && ctx.Err() == nil {
				slog.Warn("embedded etcd upkeep failed", "err", err)
			}
		}
	}()
}

func (s *Server) stopUpkeep() {
	s.upkeep.once.Do(func() {
		s.upkeep.cancel()
		<-s.upkeep.done
	})
}

// maintain checks the rule once and defragments (and disarms) as it says.
func (s *Server) maintain(ctx context.Context) error {
	st := s.Status()
	d := decide(st, s.upkeep.minFree)
	if !d.defrag {
		return nil
	}
	slog.Info("defragmenting embedded etcd", "size", st.DBSize, "inUse", st.DBSizeInUse, "nospace", d.disarm)
	if err := s.etcd.Server.Defragment(); err != nil {
		return fmt.Errorf("defragmenting embedded etcd (size %d, in use %d): %w", st.DBSize, st.DBSizeInUse, err)
	}
	s.upkeep.defrags.Add(1)
	after := s.Status()
	slog.Info("defragmented embedded etcd", "size", after.DBSize, "inUse", after.DBSizeInUse)
	if !d.disarm {
		return nil
	}
	if after.DBSize*disarmDen >= after.Quota*disarmNum {
		slog.Error("embedded etcd database over quota; writes are refused until data is deleted",
			"size", after.DBSize, "quota", after.Quota)
		return nil
	}
	_, err := s.etcd.Server.Alarm(ctx, &pb.AlarmRequest{Action: pb.AlarmRequest_DEACTIVATE,
		MemberID: uint64(s.etcd.Server.MemberID()), Alarm: pb.AlarmType_NOSPACE})
	if err != nil {
		return fmt.Errorf("disarming embedded etcd NOSPACE alarm (size %d after defrag): %w", after.DBSize, err)
	}
	slog.Info("embedded etcd NOSPACE alarm disarmed", "size", after.DBSize, "quota", after.Quota)
	return nil
}
