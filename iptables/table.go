package iptables

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// builtinChains lists each table's built-in chains, the only places where
// we insert hook rules into chains that are not ours.
var builtinChains = map[string][]string{
	"filter": {"INPUT", "FORWARD", "OUTPUT"},
	"nat":    {"PREROUTING", "INPUT", "OUTPUT", "POSTROUTING"},
	"mangle": {"PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"},
	"raw":    {"PREROUTING", "OUTPUT"},
}

// TableOptions configures a Table.
type TableOptions struct {
	// Hooks maps a built-in chain to our chain that it jumps to from its
	// first rule, e.g. "FORWARD" -> "cali-FORWARD". A hook is present only
	// while its target is among the desired chains.
	Hooks map[string]string
	// AppendHooks places each hook last in its built-in chain instead of
	// first (Felix's chainInsertMode Append).
	AppendHooks bool
	// LockWait passes --wait to iptables-save/-restore where the binary
	// accepts it (legacy iptables takes the xtables lock; nft ignores it).
	// iptables-restore waits at most LockTimeout (Felix's
	// iptablesLockTimeout; 0 means 10 s, as Felix does since
	// iptables-restore takes the lock itself) and retries every
	// LockProbeInterval (iptablesLockProbeInterval; 0 means 50 ms):
	// "--wait <seconds> --wait-interval <microseconds>".
	LockWait                       bool
	LockTimeout, LockProbeInterval time.Duration
	// SaveCmd and RestoreCmd override the binaries; the defaults are
	// iptables-save/iptables-restore, or ip6tables-* for IPv6.
	SaveCmd, RestoreCmd string
	// Observer, when set, is told of every iptables-save and -restore run.
	Observer Observer
	// Generations, shared by every Table of one network namespace, lets
	// Resync skip the read-back when nothing but our own restores changed
	// nf_tables since (nftgen.go); nil: the Table tracks only itself.
	Generations *Generations
	// Sessions, shared by every Table of one network namespace, keeps one
	// long-lived restore per binary on the nf_tables backend (session.go);
	// nil: every restore is a new process.
	Sessions *Sessions
	// SharedRules: the caller never changes the rules of a chain once it
	// has handed them to SetChains, so SetChains keeps them without a copy
	// and takes the very same slice handed again as unchanged without
	// comparing its rules (a memoised render hands every unchanged chain
	// of the node again on each apply).
	SharedRules bool
}

// ApplyStats says what one Apply did.
type ApplyStats struct {
	// ReadBack: the table was read from the kernel (iptables-save) rather
	// than taken from the cache: first Apply, after InvalidateCache, or
	// after a failure.
	ReadBack bool
	// StaleCache: a restore planned from the cached view failed, so Apply
	// invalidated the cache, read the table back and planned again; the
	// other fields describe that second attempt.
	StaleCache    bool
	RestoreRan    bool // an iptables-restore was run
	RulesWritten  int  // rules appended, inserted or replaced
	RulesDeleted  int  // rules deleted (surplus or stale hooks)
	ChainsCreated int
	ChainsDeleted int // our chains no longer desired, flushed and deleted
}

// Table keeps one iptables table (of one IP version) in the desired state:
// our "cali-" chains exactly as desired, each hook rule first in its
// built-in chain, and nothing else of ours. Foreign chains and rules are
// never touched. Not safe for concurrent use; the dataplane loop owns it.
//
// Like Felix, Table caches its view of the kernel: after a successful Apply
// it knows what the table holds (what it read, plus what it wrote), and the
// next Apply diffs the desired state against that view instead of running
// iptables-save. Changes others make are therefore not seen until
// InvalidateCache or Resync, which the owner calls on its periodic resync
// (Resync reads back only when nf_tables shows a change not ours,
// nftgen.go); a restore that fails invalidates the cache by itself.
type Table struct {
	table, save, restore string
	hooks                map[string]string
	appendHooks          bool
	lockWait             bool
	restWaitArgs         []string // what follows --wait for iptables-restore
	saveWait, restWait   bool     // --wait still believed supported
	err                  error

	haveDesired bool
	desired     map[string]*desiredChain
	mark        uint64 // SetChains calls
	invalid     error  // what is wrong with desired, found by SetChains
	dirty       bool
	// touched holds the chains whose desired rules changed, appeared or
	// went since the last successful Apply; synced says that Apply left
	// the cache equal to the desired state. A plan from that cache need
	// look only at the touched chains (an ADD on a node with 250 pods
	// aligns its own chains and one dispatch chain, not a thousand).
	touched map[string]bool
	synced  bool

	// cache is the kernel's table as of the last successful Apply: read
	// back, with that Apply's restore applied. nil: read the kernel first.
	// Our rules' specs are recorded as rendered, not as iptables-save
	// normalises them; only their hashes are compared, and the one spec
	// used to address a rule (a hook's, deleted by spec) renders as printed.
	cache *savedTable
	// gens tracks the nf_tables generation for all tables of this
	// namespace (nftgen.go); epoch is its epoch at which cache was last
	// known to be the kernel's (0: never); nft: 1 on that backend, -1
	// not, 0 not yet asked; recheck: Resync was called.
	gens    *Generations
	epoch   uint64
	nft     int8
	recheck bool

	sessions *Sessions
	// sharedRules: TableOptions.SharedRules.
	sharedRules bool
	run         runFunc
	saveTries   int
	retryWait   time.Duration
	ipVersion   int
	observer    Observer
}

// NewTable returns a driver for table ("filter", "nat", "mangle" or "raw")
// of ipVersion 4 or 6. Invalid arguments make every Apply fail. Nothing is
// read or written until Apply, and Apply does nothing before the first
// SetChains: an agent that has not yet learnt its desired state must not
// delete what an earlier run programmed.
func NewTable(table string, ipVersion int, opts TableOptions) *Table {
	t := &Table{
		table: table, hooks: map[string]string{}, appendHooks: opts.AppendHooks, lockWait: opts.LockWait,
		saveWait: opts.LockWait, restWait: opts.LockWait,
		desired: map[string]*desiredChain{}, touched: map[string]bool{},
		run: runCommand, saveTries: 3, retryWait: 50 * time.Millisecond,
		ipVersion: ipVersion, observer: opts.Observer, restWaitArgs: restoreWaitArgs(opts.LockTimeout, opts.LockProbeInterval),
		gens: opts.Generations, sessions: opts.Sessions, sharedRules: opts.SharedRules,
	}
	if t.gens == nil {
		t.gens = &Generations{}
	}
	prefix := "iptables"
	switch ipVersion {
	case 4:
	case 6:
		prefix = "ip6tables"
	default:
		t.err = fmt.Errorf("iptables: IP version %d, want 4 or 6", ipVersion)
	}
	t.save, t.restore = prefix+"-save", prefix+"-restore"
	if opts.SaveCmd != "" {
		t.save = opts.SaveCmd
	}
	if opts.RestoreCmd != "" {
		t.restore = opts.RestoreCmd
	}
	builtins, ok := builtinChains[table]
	if !ok {
		t.err = errors.Join(t.err, fmt.Errorf("iptables: unknown table %q", table))
	}
	for b, target := range opts.Hooks {
		if !slices.Contains(builtins, b) {
			t.err = errors.Join(t.err, fmt.Errorf("iptables: %s has no built-in chain %q to hook", table, b))
		}
		if !strings.HasPrefix(target, ChainPrefix) {
			t.err = errors.Join(t.err, fmt.Errorf("iptables: hook %s -> %q: target must start with %q", b, target, ChainPrefix))
		}
		t.hooks[b] = target
	}
	return t
}

// SetChains records the complete desired set of our chains; chains not
// listed are deleted by the next Apply. No I/O. A chain whose rules equal
// those of the previous call is not hashed or parsed again, and the next
// Apply plans from its cache only the chains that changed (see touched).
func (t *Table) SetChains(chains []Chain) {
	t.mark++
	var dup error
	for _, c := range chains {
		d := t.desired[c.Name]
		if d != nil && d.mark == t.mark {
			dup = fmt.Errorf("iptables: chain %s desired twice", c.Name)
		}
		if d != nil && (t.sharedRules && sameSlice(d.Rules, c.Rules) || slices.Equal(d.Rules, c.Rules)) {
			d.mark = t.mark
			continue
		}
		if !t.sharedRules {
			c.Rules = slices.Clone(c.Rules) // the caller may reuse its slices
		}
		hashes := chainHashes(c)
		if d == nil || !slices.Equal(d.hashes, hashes) {
			t.touched[c.Name] = true
		}
		t.desired[c.Name] = &desiredChain{Chain: c, hashes: hashes, facts: chainFactsOf(c), mark: t.mark}
	}
	removed := false
	for name, d := range t.desired {
		if d.mark != t.mark {
			delete(t.desired, name)
			t.touched[name] = true
			removed = true
		}
	}
	if !t.haveDesired || len(t.touched) > 0 {
		t.dirty = true
	}
	// A removed chain may be the target of one that did not change, and
	// an earlier error may be gone: check every chain then.
	full := !t.haveDesired || removed || dup != nil || t.invalid != nil
	t.haveDesired = true
	if full {
		t.invalid = errors.Join(dup, t.validate(nil))
	} else {
		t.invalid = t.validate(t.touched)
	}
}

// sameSlice reports whether a and b are the same slice: same first
// element, same length.
func sameSlice(a, b []Rule) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// desiredChain is one desired chain with what SetChains found of it.
type desiredChain struct {
	Chain
	hashes []string
	facts  chainFacts
	mark   uint64 // the SetChains call that last listed it
}

// chainFacts is what validate needs of one chain, found when it changes.
type chainFacts struct {
	jumps   []jump // to chains of ours
	newline []int  // rules with a newline in match or action
}

type jump struct {
	rule   int
	target string
}

func chainFactsOf(c Chain) chainFacts {
	var f chainFacts
	for i, r := range c.Rules {
		if strings.ContainsAny(r.Match, "\n\r") || strings.ContainsAny(r.Action, "\n\r") {
			f.newline = append(f.newline, i)
		}
		for _, target := range parseRule(r.Action).targets {
			if strings.HasPrefix(target, ChainPrefix) {
				f.jumps = append(f.jumps, jump{i, target})
			}
		}
	}
	return f
}

// Dirty reports whether the next Apply has work to do: desired state
// changed, an Apply failed, or InvalidateCache was called since the last
// successful Apply. When not dirty, Apply returns at once without I/O.
func (t *Table) Dirty() bool { return t.dirty || t.recheck }

// InvalidateCache makes the next Apply read the table back from the kernel
// (iptables-save) instead of trusting the cached view, so that changes
// made by others (a rule of ours deleted by hand, a foreign rule inserted
// above a hook) are seen and repaired. Resync is the cheaper periodic
// form. It marks the table dirty. No I/O.
func (t *Table) InvalidateCache() {
	t.cache = nil
	t.dirty = true
}

// Apply writes the difference between the kernel's table and the desired
// state in one iptables-restore --noflush (one atomic transaction); when
// nothing differs it runs no restore at all. The kernel's table is the
// cached view when valid, else read back with iptables-save (the first
// Apply, after InvalidateCache, after a failure).
//
// A restore planned from the cache may fail because the cache is stale
// (someone deleted a chain or rule it addresses); Apply then reads the
// table back and tries once more (ApplyStats.StaleCache). On failure
// everything stays dirty, the cache is invalid, and the next Apply starts
// again from a fresh read.
func (t *Table) Apply() (ApplyStats, error) {
	if t.err != nil || !t.haveDesired {
		return ApplyStats{}, t.err
	}
	if t.invalid != nil {
		return ApplyStats{}, t.invalid
	}
	if t.recheck {
		t.checkGeneration()
	}
	if !t.dirty && t.cache != nil {
		return ApplyStats{}, nil // the cache is the desired state
	}
	stats, err := t.apply()
	var re *RestoreError
	if err != nil && !stats.ReadBack && errors.As(err, &re) {
		stats, err = t.apply()
		stats.StaleCache = true
	}
	return stats, err
}

// apply is one attempt: plan from the cache (or a fresh read), restore,
// and on success cache the result.
func (t *Table) apply() (ApplyStats, error) {
	var stats ApplyStats
	kernel := t.cache
	startGen, genOK := t.generation()
	epoch := t.epoch
	var only map[string]bool // nil: plan every chain
	if kernel != nil && t.synced {
		only = t.touched
	}
	t.cache, t.dirty, t.epoch, t.synced = nil, true, 0, false // until this attempt succeeds
	if genOK {
		t.gens.begin(startGen)
	}
	fresh := kernel == nil
	if kernel == nil {
		var err error
		if kernel, err = t.read(); err != nil {
			return stats, err
		}
		stats.ReadBack = true
	}
	lines, upd, st := t.plan(kernel, only)
	st.ReadBack = stats.ReadBack
	stats = st
	if len(lines) > 0 {
		stats.RestoreRan = true
		input := []byte("*" + t.table + "\n" + strings.Join(lines, "\n") + "\nCOMMIT\n")
		if err := t.write(input); err != nil {
			return stats, err
		}
		upd.applyTo(kernel)
	}
	t.cache, t.dirty, t.synced = kernel, false, true
	clear(t.touched)
	for _, name := range upd.kept {
		t.touched[name] = true
	}
	if endGen, ok := t.generation(); ok && genOK {
		t.epoch = t.gens.end(startGen, endGen, stats.RestoreRan, fresh, epoch)
	}
	return stats, nil
}

// validate checks the desired chains (only those in some when not nil:
// chains added or changed, none removed), so that a programming error is
// reported plainly by Apply instead of as a failed restore.
func (t *Table) validate(some map[string]bool) error {
	var errs []error
	check := func(name string, f chainFacts) {
		if !strings.HasPrefix(name, ChainPrefix) || len(name) > maxChainName || strings.ContainsAny(name, " \t\n\"") {
			errs = append(errs, fmt.Errorf("iptables: chain name %q: want %q prefix, at most %d chars, no blanks",
				name, ChainPrefix, maxChainName))
		}
		for _, i := range f.newline {
			errs = append(errs, fmt.Errorf("iptables: chain %s rule %d: newline in match or action", name, i))
		}
		for _, j := range f.jumps {
			if _, ok := t.desired[j.target]; !ok {
				errs = append(errs, fmt.Errorf("iptables: chain %s rule %d jumps to %s, which is not desired", name, j.rule, j.target))
			}
		}
	}
	if some == nil {
		for name, d := range t.desired {
			check(name, d.facts)
		}
	}
	for name := range some {
		if d, ok := t.desired[name]; ok {
			check(name, d.facts)
		}
	}
	return errors.Join(errs...)
}

// read runs iptables-save for our table, retrying a few times: a save can
// fail transiently while another program holds the lock or commits.
func (t *Table) read() (*savedTable, error) {
	var lastErr error
	for try := 0; try < t.saveTries; try++ {
		if try > 0 {
			time.Sleep(t.retryWait << (try - 1))
		}
		args := []string{"-t", t.table}
		if t.saveWait {
			args = append(args, "--wait")
		}
		out, stderr, err := t.run(nil, t.save, args...)
		if err != nil && t.saveWait && waitRejected(stderr) {
			t.saveWait = false // this iptables-save has no --wait; it takes no lock
			try--
			continue // a probe of the binary, not a save: not observed
		}
		t.observer.tell(Exec{Op: OpSave, IPVersion: t.ipVersion, Table: t.table, Cmd: t.save, Args: args, Err: err})
		if err != nil {
			lastErr = fmt.Errorf("%s -t %s: %w: %s", t.save, t.table, err, bytes.TrimSpace(stderr))
			continue
		}
		return parseSave(t.table, out)
	}
	return nil, lastErr
}

// RestoreError is a failed iptables-restore: the input line it rejected
// (Line is 1-based, 0 when the output named none) and what it printed.
type RestoreError struct {
	Cmd, Table string
	Line       int
	Input      string // the rejected input line
	Stderr     string
	Err        error
}

func (e *RestoreError) Error() string {
	return fmt.Sprintf("%s (table %s) failed at input line %d %q: %v: %s",
		e.Cmd, e.Table, e.Line, e.Input, e.Err, e.Stderr)
}

func (e *RestoreError) Unwrap() error { return e.Err }

// restoreWaitArgs are the arguments of iptables-restore's --wait: whole
// seconds (rounded up; 0 is 10, Felix's choice for an iptables-restore that
// takes the lock itself) and the probe interval in microseconds (0 is 50 ms).
func restoreWaitArgs(timeout, probe time.Duration) []string {
	secs := int64((timeout + time.Second - 1) / time.Second)
	if timeout <= 0 {
		secs = 10
	}
	if probe <= 0 {
		probe = 50 * time.Millisecond
	}
	return []string{strconv.FormatInt(secs, 10), "--wait-interval", strconv.FormatInt(probe.Microseconds(), 10)}
}

func (t *Table) write(input []byte) error {
	for {
		args, stderr, shift, err := t.restoreInput(input)
		if err != nil && t.restWait && waitRejected(stderr) {
			t.restWait = false
			continue // a probe of the binary, not a restore: not observed
		}
		t.observer.tell(Exec{Op: OpRestore, IPVersion: t.ipVersion, Table: t.table, Lines: bytes.Count(input, []byte("\n")),
			Cmd: t.restore, Args: args, Err: err})
		if err != nil {
			n := max(failedLine(stderr)-shift, 0)
			return &RestoreError{Cmd: t.restore, Table: t.table, Line: n, Input: inputLine(input, n),
				Stderr: string(bytes.TrimSpace(stderr)), Err: err}
		}
		return nil
	}
}

// restoreInput runs one restore of input: fed to the namespace's
// long-lived restore on nf_tables (session.go), else a new process. shift
// is how many lines the long-lived one had taken before input: its errors
// count lines from its first input.
func (t *Table) restoreInput(input []byte) (args []string, stderr []byte, shift int, err error) {
	if t.sessions != nil && t.nft == 1 {
		res, err := t.sessions.restore(t.restore, input)
		if !errors.Is(err, errNoSession) {
			return []string{"--noflush"}, res.stderr, res.lineShift, err
		}
	}
	args = []string{"--noflush"}
	if t.restWait {
		args = append(append(args, "--wait"), t.restWaitArgs...)
	}
	_, stderr, err = t.run(input, t.restore, args...)
	return args, stderr, 0, err
}
