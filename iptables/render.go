package iptables

import (
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Ownership marks. Every chain we own is named ChainPrefix+...; every rule
// we write carries the comment HashPrefix+<hash> (first comment of the rule),
// also our hook rules inside the built-in chains.
const (
	ChainPrefix  = "cali-"
	HashPrefix   = "cali:"
	hashLen      = 16
	maxChainName = 28  // iptables' limit (XT_EXTENSION_MAXNAMELEN - 1)
	maxComment   = 255 // xt_comment's limit, without the NUL
)

// ruleHash identifies rule r of chain. It covers neither the position nor
// the hashes before it, so identical desired state always yields identical
// hashes (an agent restart recognises everything it wrote), and inserting,
// removing or changing a rule leaves the other rules' hashes alone: plan
// then touches that rule only instead of rewriting the rest of the chain
// (one new policy jump in an endpoint chain used to rewrite every rule
// after it), and every other rule keeps its packet counters.
//
// A rule whose content is unique in its chain is identified by its content
// (after zero, occurrence 0). Rules that repeat within a chain ("return if
// the policy accepted" after each policy jump) are identified by their
// content, the content of the rule just before them (after) and which
// occurrence of that pair they are: anchored to the jump before them, a
// new policy ahead of them does not renumber them. Format as Calico's: 16
// chars of base64url(sha224(...)).
//
// SetChains hashes every rule of every changed chain, so this is on the
// dataplane loop's path: it builds the input in one buffer, without fmt.
func ruleHash(chain string, after Rule, occurrence int, r Rule) string {
	var stack [512]byte
	in := append(stack[:0], chain...)
	in = append(in, 0)
	in = strconv.AppendInt(in, int64(occurrence), 10)
	in = appendRule(in, r)
	if after != (Rule{}) {
		in = appendRule(append(in, 0), after)
	}
	sum := sha256.Sum224(in)
	var out [38]byte // base64 of 28 bytes, unpadded
	base64.RawURLEncoding.Encode(out[:], sum[:])
	return string(out[:hashLen])
}

func appendRule(in []byte, r Rule) []byte {
	in = append(in, 0)
	in = append(in, strings.TrimSpace(r.Match)...)
	in = append(in, 0)
	in = append(in, strings.TrimSpace(r.Action)...)
	in = append(in, 0)
	return append(in, r.Comment...)
}

// chainHashes returns the hash of every rule of c, in order; every hash is
// distinct within the chain.
func chainHashes(c Chain) []string {
	hs := make([]string, len(c.Rules))
	norm := make([]Rule, len(c.Rules)) // as ruleHash sees them
	count := map[Rule]int{}
	for i, r := range c.Rules {
		norm[i] = Rule{Match: strings.TrimSpace(r.Match), Action: strings.TrimSpace(r.Action), Comment: r.Comment}
		count[norm[i]]++
	}
	seen := map[[2]Rule]int{}
	for i, r := range norm {
		if count[r] == 1 {
			hs[i] = ruleHash(c.Name, Rule{}, 0, r)
			continue
		}
		var prev Rule
		if i > 0 {
			prev = norm[i-1]
		}
		k := [2]Rule{prev, r}
		hs[i] = ruleHash(c.Name, prev, seen[k], r)
		seen[k]++
	}
	return hs
}

// renderRule renders one iptables-restore line: op is "-A" (pos ignored),
// "-I" or "-R" (pos is the 1-based position).
func renderRule(op, chain string, pos int, hash string, r Rule) string {
	head := op + " " + chain + " "
	if op != "-A" {
		head += strconv.Itoa(pos) + " "
	}
	return head + ruleSpec(hash, r)
}

// ruleSpec renders rule r with its hash comment as the arguments that
// follow "-A <chain> ": what a restore line carries after the operation and
// what the cached kernel view records as the rule's spec.
func ruleSpec(hash string, r Rule) string {
	var b strings.Builder
	if m := strings.TrimSpace(r.Match); m != "" {
		b.WriteString(m)
		b.WriteByte(' ')
	}
	b.WriteString(`-m comment --comment "` + HashPrefix + hash + `"`)
	if r.Comment != "" {
		b.WriteString(" -m comment --comment ")
		b.WriteString(quoteComment(r.Comment))
	}
	if a := strings.TrimSpace(r.Action); a != "" {
		b.WriteByte(' ')
		b.WriteString(a)
	}
	return b.String()
}

// quoteComment makes a human comment safe for iptables-restore: one line,
// at most maxComment bytes (cut on a rune boundary), double-quoted with
// backslash escapes, the form iptables-save prints it back in.
func quoteComment(c string) string {
	c = strings.NewReplacer("\n", " ", "\r", " ").Replace(c)
	if len(c) > maxComment {
		cut := maxComment
		for cut > 0 && !utf8.RuneStart(c[cut]) {
			cut--
		}
		c = c[:cut]
	}
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(c) + `"`
}

// splitArgs splits one iptables-save rule into arguments the way
// iptables-restore does: whitespace separates, double quotes group, and a
// backslash inside quotes escapes the next character.
func splitArgs(s string) []string {
	var args []string
	for arg, rest, ok := nextArg(s); ok; arg, rest, ok = nextArg(rest) {
		args = append(args, arg)
	}
	return args
}

// nextArg returns the first argument of s and what follows it. An argument
// without quotes is returned as a substring, without allocating: parsing a
// large save is on every Apply's path.
func nextArg(s string) (arg, rest string, ok bool) {
	start := 0
	for start < len(s) && (s[start] == ' ' || s[start] == '\t') {
		start++
	}
	if start == len(s) {
		return "", "", false
	}
	s = s[start:]
	end := 0
	for end < len(s) && s[end] != ' ' && s[end] != '\t' && s[end] != '"' {
		end++
	}
	if end == len(s) || s[end] != '"' {
		return s[:end], s[end:], true
	}
	var b strings.Builder
	quoted, escaped := false, false
	for i, c := range s {
		switch {
		case escaped:
			b.WriteRune(c)
			escaped = false
		case quoted && c == '\\':
			escaped = true
		case c == '"':
			quoted = !quoted
		case !quoted && (c == ' ' || c == '\t'):
			return b.String(), s[i:], true
		default:
			b.WriteRune(c)
		}
	}
	return b.String(), "", true
}

// savedRule is one rule as iptables-save printed it.
type savedRule struct {
	spec    string   // everything after "-A <chain> ", restore-ready
	hash    string   // our hash, "" when the rule carries none
	targets []string // chains it jumps or goes to
}

// savedTable is one table as iptables-save printed it.
type savedTable struct {
	chains map[string][]savedRule // every chain, built-in and foreign too
}

// parseSave parses iptables-save output, keeping only table. A table the
// kernel does not have yet (nft creates them lazily) parses as empty.
func parseSave(table string, out []byte) (*savedTable, error) {
	st := &savedTable{chains: map[string][]savedRule{}}
	in := false
	for i, line := range strings.Split(string(out), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		if line[0] == '*' {
			in = line[1:] == table
			continue
		}
		if !in {
			continue
		}
		switch {
		case line == "COMMIT":
			in = false
		case line[0] == ':':
			name, _, _ := strings.Cut(line[1:], " ")
			if _, ok := st.chains[name]; !ok {
				st.chains[name] = nil
			}
		default:
			if line[0] == '[' { // "[packets:bytes] -A ..." with --counters
				if _, rest, ok := strings.Cut(line, "] "); ok {
					line = rest
				}
			}
			rest, ok := strings.CutPrefix(line, "-A ")
			if !ok {
				return nil, fmt.Errorf("iptables-save line %d: unexpected %q", i+1, line)
			}
			chain, spec, _ := strings.Cut(rest, " ")
			st.chains[chain] = append(st.chains[chain], parseRule(spec))
		}
	}
	return st, nil
}

// parseRule extracts our hash (the first comment starting with HashPrefix)
// and the jump/goto targets of one saved rule.
func parseRule(spec string) savedRule {
	r := savedRule{spec: spec}
	prev := ""
	for arg, rest, ok := nextArg(spec); ok; arg, rest, ok = nextArg(rest) {
		switch prev {
		case "--comment":
			if h, ok := strings.CutPrefix(arg, HashPrefix); ok && r.hash == "" {
				r.hash = h
			}
		case "-j", "--jump", "-g", "--goto":
			r.targets = append(r.targets, arg)
		}
		prev = arg
	}
	return r
}
