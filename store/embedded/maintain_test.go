package embedded

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

const (
	mib       = int64(1 << 20)
	churnKeys = 100
	valueSize = 10 << 10 // 100 keys of 10 KiB: 1 MiB of live data per round
)

// startMember starts a member on free loopback ports with c's upkeep
// settings and returns it with a client; both end with the test.
func startMember(t *testing.T, c Config) (*Server, *clientv3.Client) {
	t.Helper()
	cu, err := FreeLoopbackURL()
	if err != nil {
		t.Fatal(err)
	}
	pu, err := FreeLoopbackURL()
	if err != nil {
		t.Fatal(err)
	}
	if c.DataDir == "" {
		c.DataDir = t.TempDir()
	}
	c.Name, c.ClientURL, c.PeerURL, c.NoFsync = "test", cu, pu, true
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := Start(ctx, c)
	if err != nil {
		t.Fatalf("embedded etcd: %v", err)
	}
	t.Cleanup(s.Close)
	cl, err := clientv3.New(clientv3.Config{Endpoints: s.Endpoints(), DialTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.Close() })
	return s, cl
}

// churn overwrites the same churnKeys keys rounds times (one txn a round),
// leaving 1 MiB live and rounds MiB of history.
func churn(t *testing.T, cl *clientv3.Client, rounds int) {
	t.Helper()
	val := strings.Repeat("x", valueSize)
	for r := range rounds {
		ops := make([]clientv3.Op, 0, churnKeys)
		for k := range churnKeys {
			ops = append(ops, clientv3.OpPut(fmt.Sprintf("/churn/%03d", k), fmt.Sprintf("%d%s", r, val)))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err := cl.Txn(ctx).Then(ops...).Commit()
		cancel()
		if err != nil {
			t.Fatalf("churn round %d: %v", r, err)
		}
	}
}

// eventually polls cond until it holds, failing with the last status after
// a generous deadline (this waits for etcd's timers; it asserts no time).
// Each poll first writes a small key, as a live cluster does all the time:
// bbolt returns the pages a commit freed only after later commits, so the
// in-use size of a member nobody writes to stays where it was.
func eventually(t *testing.T, s *Server, cl *clientv3.Client, what string, cond func(Status) bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for i := 0; ; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := cl.Put(ctx, "/tick", fmt.Sprint(i))
		cancel()
		if err != nil {
			t.Fatalf("%s: tick: %v", what, err)
		}
		st := s.Status()
		if cond(st) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: never held; last status %+v", what, st)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestUpkeepBoundsDatabase churns the same keys on three members: without
// compaction the in-use size grows with the history; with a 1 s retention it
// stays near the live data after each wait past the interval; with the
// defrag check as well the file itself shrinks back.
func TestUpkeepBoundsDatabase(t *testing.T) {
	off, offCl := startMember(t, Config{CompactionRetention: -1, DefragCheckInterval: -1})
	comp, compCl := startMember(t, Config{CompactionRetention: time.Second, DefragCheckInterval: -1})
	both, bothCl := startMember(t, Config{CompactionRetention: time.Second,
		DefragCheckInterval: 200 * time.Millisecond, DefragMinFreeBytes: mib})
	const phases, rounds = 5, 5
	bound := 4 * mib // 1 MiB live, bbolt's own pages, a second of history
	for p := range phases {
		for _, cl := range []*clientv3.Client{offCl, compCl, bothCl} {
			churn(t, cl, rounds)
		}
		eventually(t, comp, compCl, fmt.Sprintf("phase %d: compacted in-use size <= %d", p, bound),
			func(st Status) bool { return st.DBSizeInUse <= bound })
		eventually(t, both, bothCl, fmt.Sprintf("phase %d: defragmented file size <= %d", p, bound),
			func(st Status) bool { return st.DBSize <= bound && st.DBSizeInUse <= bound })
	}
	churned := int64(phases*rounds) * mib
	if st := off.Status(); st.DBSizeInUse < churned*3/4 {
		t.Errorf("member without compaction: in-use %d after %d churned; the comparison shows nothing", st.DBSizeInUse, churned)
	}
	// A compaction that ran since the last poll holds the pages it freed
	// until later commits (see eventually), so this too is polled.
	eventually(t, comp, compCl, "member with compaction only: a file at least twice its in-use size",
		func(st Status) bool { return st.DBSize > 2*st.DBSizeInUse })
	if st := comp.Status(); st.Defrags != 0 {
		t.Errorf("member with compaction only: %+v, want no defrag", st)
	}
	if st := both.Status(); st.Defrags == 0 {
		t.Errorf("member with defrag check: %+v, want defrags", st)
	}
	for _, s := range []*Server{off, comp, both} {
		if a := s.Alarms(); len(a) != 0 {
			t.Errorf("alarms %v", a)
		}
	}
}

// TestDefragShrinksFile: the check leaves an unfragmented file alone and
// defragments one that compaction left mostly free, keeping the data.
func TestDefragShrinksFile(t *testing.T) {
	s, cl := startMember(t, Config{CompactionRetention: -1, DefragCheckInterval: -1, DefragMinFreeBytes: mib})
	ctx := context.Background()
	churn(t, cl, 20)
	// etcd commits in batches: wait until the file holds the history (at
	// least half of the 20 MiB churned) before the check looks at it.
	eventually(t, s, cl, "the history reaches the file", func(st Status) bool { return st.DBSizeInUse >= 10*mib })
	if err := s.maintain(ctx); err != nil {
		t.Fatal(err)
	}
	before := s.Status()
	if before.Defrags != 0 {
		t.Fatalf("defragmented an uncompacted file: %+v", before)
	}
	resp, err := cl.Get(ctx, "/churn/007")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Compact(ctx, resp.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
	eventually(t, s, cl, "compaction frees pages", func(st Status) bool { return st.DBSizeInUse*2 <= st.DBSize })
	if err := s.maintain(ctx); err != nil {
		t.Fatal(err)
	}
	after := s.Status()
	if after.Defrags != 1 || after.DBSize*4 > before.DBSize {
		t.Fatalf("after defrag %+v, before %+v: want one defrag and a file under a quarter", after, before)
	}
	got, err := cl.Get(ctx, "/churn/007")
	if err != nil || len(got.Kvs) != 1 || !strings.HasPrefix(string(got.Kvs[0].Value), "19x") {
		t.Fatalf("data after defrag: %v %v", got, err)
	}
}

// TestQuotaAlarm runs a member whose live data is over its quota (written
// under a larger quota, then restarted with a tiny one): writes fail with
// NOSPACE and the alarm is raised; each check defragments, keeps the alarm
// while the live data is too big, and once the data is deleted and
// compacted disarms it, and writes work. (Filling the tiny quota itself
// does not make the live data too big: the file reaches the quota with a
// varying share of it free.)
func TestQuotaAlarm(t *testing.T) {
	quota := 2 * mib
	dir := t.TempDir()
	first, fcl := startMember(t, Config{DataDir: dir, CompactionRetention: -1, DefragCheckInterval: -1, QuotaBackendBytes: 4 * quota})
	ctx := context.Background()
	val := strings.Repeat("q", 64<<10)
	for i := 0; i < 40; i++ { // 2.5 MiB of live data
		if _, err := fcl.Put(ctx, fmt.Sprintf("/fill/%04d", i), val); err != nil {
			t.Fatalf("filling under the large quota: %v", err)
		}
	}
	_ = fcl.Close()
	first.Close()

	s, cl := startMember(t, Config{DataDir: dir, CompactionRetention: -1, DefragCheckInterval: -1, QuotaBackendBytes: quota})
	if st := s.Status(); st.Quota != quota || st.Alarm(AlarmNoSpace) {
		t.Fatalf("restarted member %+v", st)
	}
	if _, err := cl.Put(ctx, "/one-more", val); !errors.Is(err, rpctypes.ErrNoSpace) {
		t.Fatalf("writing over a %d-byte quota: %v, want %v", quota, err, rpctypes.ErrNoSpace)
	}
	if st := s.Status(); !st.Alarm(AlarmNoSpace) {
		t.Fatalf("after NOSPACE: %+v, want the alarm", st)
	}
	if err := s.maintain(ctx); err != nil {
		t.Fatal(err)
	}
	if st := s.Status(); !st.Alarm(AlarmNoSpace) || st.Defrags != 1 {
		t.Fatalf("after a check with the live data still over the quota: %+v, want one defrag and the alarm kept", st)
	}
	resp, err := cl.Delete(ctx, "/fill/", clientv3.WithPrefix())
	if err != nil {
		t.Fatalf("delete under NOSPACE: %v", err)
	}
	if _, err := cl.Compact(ctx, resp.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
	if err := s.maintain(ctx); err != nil {
		t.Fatal(err)
	}
	if st := s.Status(); st.Alarm(AlarmNoSpace) || st.Defrags != 2 || st.DBSize*disarmDen >= quota*disarmNum {
		t.Fatalf("after delete, compact and check: %+v, want one defrag and no alarm", st)
	}
	if _, err := cl.Put(ctx, "/after", "ok"); err != nil {
		t.Fatalf("write after disarm: %v", err)
	}
}

func TestDecide(t *testing.T) {
	q := 100 * mib
	for _, tc := range []struct {
		name string
		st   Status
		want decision
	}{
		{"compact file", Status{DBSize: 200 * mib, DBSizeInUse: 190 * mib, Quota: q}, decision{}},
		{"mostly free", Status{DBSize: 200 * mib, DBSizeInUse: 90 * mib, Quota: q}, decision{defrag: true}},
		{"free but small", Status{DBSize: 60 * mib, DBSizeInUse: 10 * mib, Quota: q}, decision{}},
		{"free but under half", Status{DBSize: 1000 * mib, DBSizeInUse: 600 * mib, Quota: q}, decision{}},
		{"nospace, live data fits", Status{DBSize: 100 * mib, DBSizeInUse: 70 * mib, Quota: q, Alarms: []string{AlarmNoSpace}}, decision{defrag: true, disarm: true}},
		{"nospace, in-use figure stale", Status{DBSize: 100 * mib, DBSizeInUse: 100 * mib, Quota: q, Alarms: []string{AlarmNoSpace}}, decision{defrag: true, disarm: true}},
		{"other alarm", Status{DBSize: 100 * mib, DBSizeInUse: 95 * mib, Quota: q, Alarms: []string{"CORRUPT"}}, decision{}},
	} {
		if got := decide(tc.st, 64*mib); got != tc.want {
			t.Errorf("%s: decide(%+v) = %+v, want %+v", tc.name, tc.st, got, tc.want)
		}
	}
}
