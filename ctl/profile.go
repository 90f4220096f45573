package ctl

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/calico-aio/calico-aio/cni"
	"github.com/calico-aio/calico-aio/store"
	"github.com/calico-aio/calico-aio/store/api"
)

// The classic profile verbs. They edit ordinary projectcalico.org/v3
// Profile resources (inbound = spec.ingress, outbound = spec.egress), which
// calico-node enforces for the endpoints naming them in spec.profiles.

const profileUsage = `Usage:
  calicoctl profile add <PROFILE>
  calicoctl profile remove <PROFILE> [--no-check]
  calicoctl profile show [--detailed]
  calicoctl profile <PROFILE> rule add (inbound|outbound) [--at=<POS>] <RULE>
  calicoctl profile <PROFILE> rule remove (inbound|outbound) (--at=<POS> | <RULE>)
  calicoctl profile <PROFILE> rule show
  calicoctl profile <PROFILE> rule json
  calicoctl profile <PROFILE> rule update        (reads the rules as JSON on stdin)

RULE: ` + ruleSyntax + `
  "tag T" matches endpoints with label T (selector has(T)); PROTOCOL is tcp,
  udp, sctp, udplite, icmp, icmpv6 or a number; ports are N or N:M, comma-separated.
POS: 1 is the first rule, -1 the last (default for add: append).

"profile add NAME" creates the profile as classic Calico did: its members
get the label NAME (the classic tag), inbound traffic is allowed from
members, outbound traffic is allowed. "rule json" prints
{"ingress": [...], "egress": [...]} (v3 rules); "rule update" replaces both
lists with such a document ("inbound_rules"/"outbound_rules" are accepted
as names too).

Options:`

func runProfile(o IO, args []string) error {
	fs := newFlagSet("profile", o)
	var ds datastoreFlags
	ds.register(fs)
	detailed := fs.Bool("detailed", false, "show: list the endpoints using each profile")
	noCheck := fs.Bool("no-check", false, "remove: do not refuse a profile that endpoints still use")
	at := fs.String("at", "", "rule add/remove: the rule's position (1 is first, -1 is last)")
	fs.Usage = func() {
		fmt.Fprintln(o.Stderr, profileUsage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	rest := fs.Args()
	if len(rest) == 0 {
		fs.Usage()
		return exitError{code: 1}
	}
	ctx := context.Background()
	run := func(do func(c *store.Client) error) error {
		c, err := connectFor("profile", &ds, o)
		if err != nil {
			return err
		}
		defer c.Close()
		if err := do(c); err != nil {
			return datastoreError(c, err)
		}
		return nil
	}
	usage := func(u string) error { return fmt.Errorf("usage: calicoctl profile %s", u) }
	switch rest[0] {
	case "add":
		if len(rest) != 2 {
			return usage("add <PROFILE>")
		}
		return run(func(c *store.Client) error { return profileAdd(ctx, o, c, rest[1]) })
	case "remove":
		if len(rest) != 2 {
			return usage("remove <PROFILE> [--no-check]")
		}
		return run(func(c *store.Client) error { return profileRemove(ctx, o, c, rest[1], *noCheck) })
	case "show":
		if len(rest) != 1 {
			return usage("show [--detailed]")
		}
		return run(func(c *store.Client) error { return profileShow(ctx, o, c, *detailed) })
	}
	if len(rest) < 3 || rest[1] != "rule" {
		fs.Usage()
		return exitError{code: 1}
	}
	name, verb, words := rest[0], rest[2], rest[3:]
	switch verb {
	case "show", "json", "update":
		if len(words) != 0 {
			return usage("<PROFILE> rule " + verb)
		}
		return run(func(c *store.Client) error { return ruleReadWrite(ctx, o, c, name, verb) })
	case "add", "remove":
		if len(words) == 0 || (words[0] != "inbound" && words[0] != "outbound") {
			return usage("<PROFILE> rule " + verb + " (inbound|outbound) [--at=<POS>] <RULE>")
		}
		dir, words := words[0], words[1:]
		var rule *api.Rule
		if verb == "add" || len(words) > 0 {
			r, err := parseRule(words)
			if err != nil {
				return fmt.Errorf("rule %q: %w", strings.Join(words, " "), err)
			}
			rule = &r
		}
		if verb == "remove" && (rule == nil) == (*at == "") {
			return usage("<PROFILE> rule remove (inbound|outbound) (--at=<POS> | <RULE>): give one of them")
		}
		return run(func(c *store.Client) error { return ruleEdit(ctx, o, c, name, verb, dir, *at, rule) })
	}
	fs.Usage()
	return exitError{code: 1}
}

func profileAdd(ctx context.Context, o IO, c *store.Client, name string) error {
	_, err := c.CreateResource(ctx, cni.NetworkProfile(name))
	switch {
	case errors.Is(err, store.ErrAlreadyExists):
		fmt.Fprintf(o.Stdout, "Profile %s already exists.\n", name)
		return nil
	case err != nil:
		return fmt.Errorf("cannot create profile %q: %w", name, err)
	}
	fmt.Fprintf(o.Stdout, "Created profile %s\n", name)
	return nil
}

func profileRemove(ctx context.Context, o IO, c *store.Client, name string, noCheck bool) error {
	r, err := c.GetResource(ctx, profileKind(), "", name)
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("profile %s does not exist", name)
	}
	if err != nil {
		return err
	}
	if !noCheck {
		users, err := profileUsers(ctx, c)
		if err != nil {
			return err
		}
		if eps := users[name]; len(eps) > 0 {
			names := make([]string, len(eps))
			for i, w := range eps {
				names[i] = w.Metadata.Namespace + "/" + w.Metadata.Name
			}
			return fmt.Errorf("profile %s is in use by %d endpoint(s): %s; remove it from them first (or use --no-check)", name, len(eps), strings.Join(names, ", "))
		}
	}
	if _, err := c.DeleteObject(ctx, r); err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	fmt.Fprintf(o.Stdout, "Deleted profile %s\n", name)
	return nil
}

// profileUsers lists the endpoints of each profile.
func profileUsers(ctx context.Context, c *store.Client) (map[string][]*api.WorkloadEndpoint, error) {
	all, _, err := c.ListResources(ctx, wepKind(), "")
	if err != nil {
		return nil, err
	}
	out := map[string][]*api.WorkloadEndpoint{}
	for _, r := range all {
		w := r.(*api.WorkloadEndpoint)
		for _, p := range w.Spec.Profiles {
			out[p] = append(out[p], w)
		}
	}
	return out, nil
}

func profileShow(ctx context.Context, o IO, c *store.Client, detailed bool) error {
	profs, _, err := c.ListResources(ctx, profileKind(), "")
	if err != nil {
		return err
	}
	if !detailed {
		t := newBoxTable("Name")
		for _, p := range profs {
			t.add(p.GetObjectMeta().Name)
		}
		return t.write(o.Stdout)
	}
	users, err := profileUsers(ctx, c)
	if err != nil {
		return err
	}
	states := endpointStates(ctx, c)
	t := newBoxTable("Name", "Host", "Orchestrator ID", "Workload ID", "Endpoint ID", "Addresses", "MAC", "State")
	for _, p := range profs {
		name := p.GetObjectMeta().Name
		if len(users[name]) == 0 {
			t.add(name)
		}
		for _, w := range users[name] {
			t.add(name, w.Spec.Node, w.Spec.Orchestrator, workloadName(w), w.Metadata.Name,
				strings.Join(w.Spec.IPNetworks, ","), w.Spec.MAC, states.of(w))
		}
	}
	return t.write(o.Stdout)
}

func getProfile(ctx context.Context, c *store.Client, name string) (*api.Profile, error) {
	r, err := c.GetResource(ctx, profileKind(), "", name)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("profile %s does not exist", name)
	}
	if err != nil {
		return nil, err
	}
	return r.(*api.Profile), nil
}

// modifyProfile changes a profile with compare-and-swap.
func modifyProfile(ctx context.Context, c *store.Client, name string, change func(*api.Profile) error) (*api.Profile, error) {
	p, err := modify(ctx, c, profileKind(), "", name, change)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("profile %s does not exist", name)
	}
	return p, err
}

// ruleList is the rules of one direction of a profile.
func ruleList(p *api.Profile, dir string) *[]api.Rule {
	if dir == "inbound" {
		return &p.Spec.Ingress
	}
	return &p.Spec.Egress
}

// ruleEdit adds a rule (at a position or the end), or removes one by
// position or by its words.
func ruleEdit(ctx context.Context, o IO, c *store.Client, name, verb, dir, at string, rule *api.Rule) error {
	var msg string
	_, err := modifyProfile(ctx, c, name, func(p *api.Profile) error {
		rules := ruleList(p, dir)
		if verb == "add" {
			for i, r := range *rules {
				if sameRule(r, *rule) {
					msg = fmt.Sprintf("The rule %q is already %s rule %d of profile %s; not added.", formatRule(*rule), dir, i+1, name)
					return errUnchanged
				}
			}
			idx := len(*rules)
			if at != "" {
				var err error
				if idx, err = rulePosition(at, len(*rules), true); err != nil {
					return err
				}
			}
			*rules = append((*rules)[:idx], append([]api.Rule{*rule}, (*rules)[idx:]...)...)
			msg = fmt.Sprintf("Added %s rule %d to profile %s: %s", dir, idx+1, name, formatRule(*rule))
			return nil
		}
		idx := -1
		if at != "" {
			var err error
			if idx, err = rulePosition(at, len(*rules), false); err != nil {
				return err
			}
		} else {
			for i, r := range *rules {
				if sameRule(r, *rule) {
					idx = i
					break
				}
			}
			if idx < 0 {
				return fmt.Errorf("profile %s has no %s rule %q", name, dir, formatRule(*rule))
			}
		}
		msg = fmt.Sprintf("Removed %s rule %d from profile %s: %s", dir, idx+1, name, formatRule((*rules)[idx]))
		*rules = append((*rules)[:idx], (*rules)[idx+1:]...)
		return nil
	})
	if err != nil && !errors.Is(err, errUnchanged) {
		return err
	}
	fmt.Fprintln(o.Stdout, msg)
	return nil
}

// ruleSet is the document of "rule json" and "rule update".
type ruleSet struct {
	Ingress []api.Rule `json:"ingress"`
	Egress  []api.Rule `json:"egress"`
}

func ruleReadWrite(ctx context.Context, o IO, c *store.Client, name, verb string) error {
	if verb == "update" {
		data, err := io.ReadAll(o.Stdin)
		if err != nil {
			return err
		}
		rs, err := parseRuleSet(data)
		if err != nil {
			return err
		}
		if _, err := modifyProfile(ctx, c, name, func(p *api.Profile) error {
			p.Spec.Ingress, p.Spec.Egress = rs.Ingress, rs.Egress
			return nil
		}); err != nil {
			return fmt.Errorf("updating the rules of profile %s: %w", name, err)
		}
		fmt.Fprintf(o.Stdout, "Updated the rules of profile %s: %d inbound, %d outbound.\n", name, len(rs.Ingress), len(rs.Egress))
		return nil
	}
	p, err := getProfile(ctx, c, name)
	if err != nil {
		return err
	}
	if verb == "json" {
		rs := ruleSet{Ingress: p.Spec.Ingress, Egress: p.Spec.Egress}
		if rs.Ingress == nil {
			rs.Ingress = []api.Rule{}
		}
		if rs.Egress == nil {
			rs.Egress = []api.Rule{}
		}
		j, err := json.MarshalIndent(rs, "", "  ")
		if err != nil {
			return err
		}
		fmt.Fprintln(o.Stdout, string(j))
		return nil
	}
	for _, d := range []struct {
		title string
		rules []api.Rule
	}{{"Inbound rules:", p.Spec.Ingress}, {"Outbound rules:", p.Spec.Egress}} {
		fmt.Fprintln(o.Stdout, d.title)
		for i, r := range d.rules {
			fmt.Fprintf(o.Stdout, "  %2d %s\n", i+1, formatRule(r))
		}
	}
	return nil
}

// parseRuleSet reads {"ingress": [...], "egress": [...]}; the classic names
// inbound_rules and outbound_rules are accepted too. A missing list is
// empty. Unknown fields are an error, so that a typo does not drop a match.
func parseRuleSet(data []byte) (ruleSet, error) {
	var rs ruleSet
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return rs, fmt.Errorf("rules JSON on stdin: %w", err)
	}
	seen := map[string]string{}
	for k, v := range raw {
		var dst *[]api.Rule
		var which string
		switch k {
		case "ingress", "inbound_rules":
			dst, which = &rs.Ingress, "inbound"
		case "egress", "outbound_rules":
			dst, which = &rs.Egress, "outbound"
		default:
			return rs, fmt.Errorf("rules JSON: unknown field %q (want ingress and egress)", k)
		}
		if prev, dup := seen[which]; dup {
			return rs, fmt.Errorf("rules JSON: %q and %q are both the %s rules", prev, k, which)
		}
		seen[which] = k
		dec := json.NewDecoder(bytes.NewReader(v))
		dec.DisallowUnknownFields()
		if err := dec.Decode(dst); err != nil {
			return rs, fmt.Errorf("rules JSON: %s: %w", k, err)
		}
	}
	return rs, nil
}
