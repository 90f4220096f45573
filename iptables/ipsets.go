package iptables

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// Ownership marks for ipsets: our sets are named cali40* (IPv4) and cali60*
// (IPv6). While a set is rewritten, its contents are built in a temporary
// set named with cali4t/cali6t in place of those six characters (Calico's
// convention too); a leftover temporary set is destroyed by the next Apply.
const (
	maxSetName = 31 // IPSET_MAXNAMELEN - 1
	// DefaultMaxElem is the maxelem of every set we create unless
	// IPSetsOptions or SetMaxElem say otherwise (Felix's maxIpsetSize).
	DefaultMaxElem = 1 << 20
)

var (
	setPrefix  = map[string]string{FamilyInet: "cali40", FamilyInet6: "cali60"}
	tempPrefix = map[string]string{"cali40": "cali4t", "cali60": "cali6t"}
)

// ErrIPSetInUse is wrapped by Apply's error when a set could not be
// destroyed (removed, or re-created with another type) because the kernel
// still uses it, typically an iptables rule "-m set --match-set". Apply
// iptables first, so that no rule references a set about to go.
var ErrIPSetInUse = errors.New("ipset still in use by a kernel component")

// IPSetsOptions configures an IPSets driver.
type IPSetsOptions struct {
	IPVersion int    // 4: manage only cali40 sets; 6: only cali60; 0: both
	Cmd       string // the ipset binary; default "ipset"
	// Observer, when set, is told of every ipset save and restore run,
	// and of the member changes written over netlink (OpNetlink).
	Observer Observer
	// MaxElem is the maxelem of the sets (0: DefaultMaxElem).
	MaxElem int
}

// ErrIPSetTooBig is wrapped by Apply's error for a desired set with more
// members than maxelem: the kernel would refuse them ("Hash is full"), so
// the set is left as the kernel has it until it fits again.
var ErrIPSetTooBig = errors.New("more members than the maximum IP set size")

type setSpec struct {
	setType, family string
	members         map[string]struct{}
}

// IPSets keeps our ipsets in the desired state: exactly the desired sets,
// with exactly the desired members. Sets not named as ours are never
// touched. Not safe for concurrent use; the dataplane loop owns it.
//
// Like Table, IPSets caches its view of the kernel after a successful
// Apply, and diffs against it instead of running `ipset save` until
// InvalidateCache or a failed restore.
type IPSets struct {
	cmd      string
	prefixes []string // our name prefixes, temporary ones included
	desired  map[string]*setSpec
	dirty    bool

	// cache holds our sets as the kernel has them after the last
	// successful Apply; nil: read them back first. Never shares a members
	// map with desired.
	cache map[string]*savedSet
	// pending names the sets whose desired state changed since the last
	// successful Apply; the others are as cached, and a plan from the
	// cache considers only these.
	pending map[string]struct{}

	run       runFunc
	saveTries int
	retryWait time.Duration
	writes    int // ipset commands run beyond the read-back, for tests
	// openNL opens the netlink socket that member-only changes of
	// existing sets go through (ipsets_netlink.go); nil: they go through
	// `ipset restore` like the rest. Tests on a fake runner leave it nil
	// so that they never touch the kernel.
	openNL   func() (memberConn, error)
	nlWrites int // members written over netlink, for tests
	observer Observer
	maxElem  int
	// tooBig names the desired sets the last plan left alone (ErrIPSetTooBig).
	tooBig []string
}

// NewIPSets returns a driver with no desired sets. No I/O.
func NewIPSets(opts IPSetsOptions) *IPSets {
	s := &IPSets{cmd: opts.Cmd, desired: map[string]*setSpec{}, pending: map[string]struct{}{}, run: runCommand,
		openNL: openNetlink, saveTries: 3, retryWait: 50 * time.Millisecond, observer: opts.Observer, maxElem: opts.MaxElem}
	if s.maxElem <= 0 {
		s.maxElem = DefaultMaxElem
	}
	if s.cmd == "" {
		s.cmd = "ipset"
	}
	if opts.IPVersion != 6 {
		s.prefixes = append(s.prefixes, "cali40", "cali4t")
	}
	if opts.IPVersion != 4 {
		s.prefixes = append(s.prefixes, "cali60", "cali6t")
	}
	return s
}

func (s *IPSets) ours(name string) bool {
	return slices.ContainsFunc(s.prefixes, func(p string) bool { return strings.HasPrefix(name, p) })
}

// SetIPSet records set name as desired with exactly members. setType is
// hash:ip, hash:net or hash:ip,port; family inet (name must start with
// cali40) or inet6 (cali60). Invalid input is rejected and not recorded.
func (s *IPSets) SetIPSet(name, setType, family string, members []string) error {
	switch setType {
	case SetTypeIP, SetTypeNet, SetTypeIPPort:
	default:
		return fmt.Errorf("ipset %s: type %q, want %s, %s or %s", name, setType, SetTypeIP, SetTypeNet, SetTypeIPPort)
	}
	prefix, ok := setPrefix[family]
	if !ok {
		return fmt.Errorf("ipset %s: family %q, want %s or %s", name, family, FamilyInet, FamilyInet6)
	}
	if !strings.HasPrefix(name, prefix) || !s.ours(name) || len(name) > maxSetName ||
		strings.ContainsAny(name, " \t\n") {
		return fmt.Errorf("ipset name %q: want prefix %s (family %s) managed by this driver, at most %d chars, no blanks",
			name, prefix, family, maxSetName)
	}
	spec := &setSpec{setType: setType, family: family, members: make(map[string]struct{}, len(members))}
	canon, err := spec.canon(members)
	if err != nil {
		return fmt.Errorf("ipset %s: %w", name, err)
	}
	for _, c := range canon {
		spec.members[c] = struct{}{}
	}
	s.desired[name] = spec
	s.changed(name)
	return nil
}

func (sp *setSpec) canon(members []string) ([]string, error) {
	canon := make([]string, 0, len(members))
	for _, m := range members {
		c, err := canonMember(sp.setType, sp.family, m)
		if err != nil {
			return nil, err
		}
		canon = append(canon, c)
	}
	return canon, nil
}

// RemoveIPSet records that set name is no longer desired.
func (s *IPSets) RemoveIPSet(name string) {
	delete(s.desired, name)
	s.changed(name)
}

// changed records that desired set name changed: the next Apply plans it
// (and, with a valid cache, only the sets so recorded).
func (s *IPSets) changed(name string) {
	s.pending[name] = struct{}{}
	s.dirty = true
}

// AddMembers adds members to the desired set name.
func (s *IPSets) AddMembers(name string, members []string) error {
	sp, ok := s.desired[name]
	if !ok {
		return fmt.Errorf("ipset %s: not a desired set", name)
	}
	canon, err := sp.canon(members)
	if err != nil {
		return fmt.Errorf("ipset %s: %w", name, err)
	}
	for _, c := range canon {
		sp.members[c] = struct{}{}
	}
	s.changed(name)
	return nil
}

// RemoveMembers removes members from the desired set name.
func (s *IPSets) RemoveMembers(name string, members []string) error {
	sp, ok := s.desired[name]
	if !ok {
		return fmt.Errorf("ipset %s: not a desired set", name)
	}
	canon, err := sp.canon(members)
	if err != nil {
		return fmt.Errorf("ipset %s: %w", name, err)
	}
	for _, c := range canon {
		delete(sp.members, c)
	}
	s.changed(name)
	return nil
}

// SetMaxElem changes the maxelem of our sets: the next Apply rewrites
// every set whose maxelem differs, through a temporary set swapped in, so
// members are kept and iptables references stay valid. No I/O.
func (s *IPSets) SetMaxElem(n int) {
	if n <= 0 {
		n = DefaultMaxElem
	}
	if n == s.maxElem {
		return
	}
	s.maxElem = n
	for name := range s.desired {
		s.changed(name)
	}
}

// Dirty reports whether desired state changed, an Apply failed, or
// InvalidateCache was called since the last successful Apply. When not
// dirty, Apply returns at once without I/O.
func (s *IPSets) Dirty() bool { return s.dirty }

// InvalidateCache makes the next Apply read our sets back with `ipset save`
// instead of trusting the cached view, so that changes made by others are
// seen and repaired. Call it on the periodic resync. It marks the driver
// dirty. No I/O.
func (s *IPSets) InvalidateCache() {
	s.cache = nil
	s.dirty = true
}

// Apply makes our sets exactly the desired ones, diffing against the
// cached view of the kernel, or when it is invalid against our sets read
// back with `ipset save` (first Apply, after InvalidateCache, after a
// failure). Small member differences of a set the kernel has with the
// desired type, family and maxelem are written as adds and dels over
// netlink, in the calling thread's network namespace, without a process
// (a pod's IP joining its selector sets on a CNI ADD). Everything else
// goes through one `ipset -exist restore`: missing sets are created;
// large member differences (more than about half the set's size) or a
// different maxelem by filling a temporary set and swapping it in, which
// is atomic and works while iptables references the set; a type or
// family change needs destroy and re-create, which fails (ErrIPSetInUse)
// while the set is referenced. Sets no longer desired are destroyed. When
// nothing differs no command beyond the read (if any) runs. A failing set
// does not stop the others; all failures are returned joined, the driver
// stays dirty and its cache invalid. A write planned from the cache that
// fails may be due to a stale cache (a set destroyed by hand): Apply then
// reads the sets back and tries once more.
func (s *IPSets) Apply() error {
	if !s.dirty && s.cache != nil {
		return nil // the cache is the desired state
	}
	fromCache, err := s.apply()
	if err != nil && fromCache {
		_, err = s.apply()
	}
	return err
}

// apply is one attempt; fromCache says it planned from the cache (so ran
// no `ipset save`).
func (s *IPSets) apply() (fromCache bool, err error) {
	kernel := s.cache
	fromCache = kernel != nil
	s.cache, s.dirty = nil, true // until this attempt succeeds
	if kernel == nil {
		if kernel, err = s.read(); err != nil {
			return false, err
		}
	}
	var only map[string]struct{}
	if fromCache {
		only = s.pending
	}
	groups := s.plan(kernel, only)
	if len(groups) > 0 {
		// Member-only changes of existing sets over netlink, the rest
		// through ipset; a failure in either leaves the other to run.
		viaNL, viaRestore := s.splitNetlink(groups)
		var errs []error
		if len(viaNL) > 0 {
			if err := s.writeNetlink(viaNL); errors.Is(err, errNoNetlink) {
				viaRestore = groups // nothing written: ipset can still do it all
			} else {
				errs = append(errs, err)
			}
		}
		if len(viaRestore) > 0 {
			errs = append(errs, s.restore(viaRestore))
		}
		if err := errors.Join(errs...); err != nil {
			return fromCache, err // partly applied: only a read tells what is there
		}
		s.commit(kernel, groups)
	}
	s.cache, s.dirty = kernel, false
	clear(s.pending)
	var errs []error
	for _, name := range s.tooBig { // planned again on every Apply until they fit
		s.changed(name)
		errs = append(errs, fmt.Errorf("ipset %s: %d members, maxelem %d: %w; left as it is",
			name, len(s.desired[name].members), s.maxElem, ErrIPSetTooBig))
	}
	return false, errors.Join(errs...)
}

func (s *IPSets) read() (map[string]*savedSet, error) {
	var lastErr error
	for try := 0; try < s.saveTries; try++ {
		if try > 0 {
			time.Sleep(s.retryWait << (try - 1))
		}
		out, stderr, err := s.run(nil, s.cmd, "save")
		s.observer.tell(Exec{Op: OpSave, IPSet: true, Err: err})
		if err != nil {
			lastErr = fmt.Errorf("%s save: %w: %s", s.cmd, err, bytes.TrimSpace(stderr))
			continue
		}
		return parseIPSetSave(out, s.ours)
	}
	return nil, lastErr
}

func isTemp(name string) bool {
	return strings.HasPrefix(name, "cali4t") || strings.HasPrefix(name, "cali6t")
}

// group is the restore lines for one set; groups fail independently.
type group struct {
	set    string
	lines  []string
	effect groupEffect // on set, once all lines succeeded
	adds   []string    // effDelta: members added, then
	dels   []string    // members deleted
}

// groupEffect is what a group does to its set, for the cache.
type groupEffect int

const (
	effDestroy groupEffect = iota // the set is gone
	effReplace                    // the set is now exactly as desired
	effDelta                      // the group's adds and dels were applied
)

// commit brings kernel, our sets before the restore, to what the restore
// of groups (all of them successful) left.
func (s *IPSets) commit(kernel map[string]*savedSet, groups []group) {
	for _, g := range groups {
		switch g.effect {
		case effDestroy:
			delete(kernel, g.set)
		case effReplace:
			sp := s.desired[g.set]
			kernel[g.set] = &savedSet{setType: sp.setType, family: sp.family, maxElem: s.maxElem,
				members: maps.Clone(sp.members)}
		case effDelta:
			k := kernel[g.set]
			for _, m := range g.adds {
				k.members[m] = struct{}{}
			}
			for _, m := range g.dels {
				delete(k.members, m)
			}
		}
	}
}

func (s *IPSets) createLine(name string, sp *setSpec) string {
	return fmt.Sprintf("create %s %s family %s maxelem %d", name, sp.setType, sp.family, s.maxElem)
}

func addLines(lines []string, name string, members []string) []string {
	for _, m := range members {
		lines = append(lines, "add "+name+" "+m)
	}
	return lines
}

// plan returns the restore groups that take kernel to the desired state:
// leftover temporary sets first, then desired sets by name, then removals.
// With only non-nil, it considers only the sets only names (the others
// being known to be as desired).
func (s *IPSets) plan(kernel map[string]*savedSet, only map[string]struct{}) []group {
	kernelNames, desiredNames := slices.Sorted(maps.Keys(kernel)), slices.Sorted(maps.Keys(s.desired))
	if only != nil {
		kernelNames, desiredNames = nil, nil
		for _, name := range slices.Sorted(maps.Keys(only)) {
			if _, ok := kernel[name]; ok {
				kernelNames = append(kernelNames, name)
			}
			if _, ok := s.desired[name]; ok {
				desiredNames = append(desiredNames, name)
			}
		}
	}
	var groups []group
	s.tooBig = nil
	for _, name := range kernelNames {
		if isTemp(name) { // left over from an interrupted rewrite
			groups = append(groups, group{set: name, lines: []string{"destroy " + name}})
		}
	}
	for _, name := range desiredNames {
		sp, k := s.desired[name], kernel[name]
		if len(sp.members) > s.maxElem {
			s.tooBig = append(s.tooBig, name)
			continue
		}
		all := slices.Sorted(maps.Keys(sp.members))
		switch {
		case k == nil:
			groups = append(groups, group{set: name, effect: effReplace,
				lines: addLines([]string{s.createLine(name, sp)}, name, all)})
		case k.setType != sp.setType || k.family != sp.family:
			lines := []string{"destroy " + name, s.createLine(name, sp)}
			groups = append(groups, group{set: name, effect: effReplace, lines: addLines(lines, name, all)})
		default:
			var adds, dels []string
			for _, m := range all {
				if _, ok := k.members[m]; !ok {
					adds = append(adds, m)
				}
			}
			for m := range k.members {
				if _, ok := sp.members[m]; !ok {
					dels = append(dels, m)
				}
			}
			slices.Sort(dels)
			switch {
			// A rewrite costs len(all)+3 lines, but is atomic: prefer it
			// once the delta reaches half of that.
			case k.maxElem != s.maxElem || 2*(len(adds)+len(dels)) > len(all)+3:
				tmp := tempPrefix[name[:6]] + name[6:]
				lines := addLines([]string{s.createLine(tmp, sp)}, tmp, all)
				lines = append(lines, "swap "+tmp+" "+name, "destroy "+tmp)
				groups = append(groups, group{set: name, effect: effReplace, lines: lines})
			case len(adds)+len(dels) > 0:
				lines := addLines(nil, name, adds) // adds before deletes
				for _, m := range dels {
					lines = append(lines, "del "+name+" "+m)
				}
				groups = append(groups, group{set: name, effect: effDelta, lines: lines, adds: adds, dels: dels})
			}
		}
	}
	for _, name := range kernelNames {
		if _, ok := s.desired[name]; !ok && !isTemp(name) {
			groups = append(groups, group{set: name, lines: []string{"destroy " + name}})
		}
	}
	return groups
}

// restore runs all groups through `ipset -exist restore`. ipset stops at
// the first failing line; the group holding it is reported and the run
// resumes with the next group, so one bad set does not block the rest.
func (s *IPSets) restore(groups []group) error {
	var errs []error
	for len(groups) > 0 {
		var input bytes.Buffer
		var lastLine []int // last input line of each group
		n := 0
		for _, g := range groups {
			for _, l := range g.lines {
				input.WriteString(l)
				input.WriteByte('\n')
			}
			n += len(g.lines)
			lastLine = append(lastLine, n)
		}
		s.writes++
		_, stderr, err := s.run(input.Bytes(), s.cmd, "-exist", "restore")
		s.observer.tell(Exec{Op: OpRestore, IPSet: true, Lines: bytes.Count(input.Bytes(), []byte("\n")), Err: err})
		if err == nil {
			break
		}
		msg := string(bytes.TrimSpace(stderr))
		n = failedLine(stderr)
		failed, _ := slices.BinarySearch(lastLine, n)
		if n == 0 || failed >= len(groups) {
			return errors.Join(append(errs, fmt.Errorf("%s restore: %w: %s", s.cmd, err, msg))...)
		}
		g := groups[failed]
		if strings.Contains(msg, "in use by a kernel component") {
			err = fmt.Errorf("%w (%w)", ErrIPSetInUse, err)
		}
		errs = append(errs, fmt.Errorf("ipset %s: %q failed: %w: %s", g.set, inputLine(input.Bytes(), n), err, msg))
		groups = groups[failed+1:]
	}
	return errors.Join(errs...)
}
