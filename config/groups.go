package config

import (
	"fmt"
	"os"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// maxGroups bounds GROUPS: each group may take two connections of a pool
// capped at 100 (see groupConns).
const maxGroups = 32

// groupNamePattern is a group's name: a prefix of its own, without an
// underscore (ETH_MAIN_RPC_URL would be ambiguous).
var groupNamePattern = regexp.MustCompile(`^[a-z][a-z0-9]{0,19}$`)

// keys are every variable Config reads; groupKeys a group's.
var keys, groupKeys = func() (all, group map[string]bool) {
	all, group = map[string]bool{}, map[string]bool{}
	t := reflect.TypeFor[Config]()
	for i := range t.NumField() {
		f := t.Field(i)
		key := f.Tag.Get("envconfig")
		if key == "" {
			continue
		}
		all[key] = true
		if isGroupField(f) {
			group[key] = true
		}
	}
	return all, group
}()

// parseGroups reads GROUPS: the names in order, lower case, or the
// problems that make it unusable.
func parseGroups(v string) ([]string, []string) {
	if strings.TrimSpace(v) == "" {
		return nil, nil
	}
	var (
		names    []string
		problems problems
	)
	for i, raw := range strings.Split(v, ",") {
		name := strings.ToLower(strings.TrimSpace(raw))
		switch {
		case name == "":
			problems.add("GROUPS: entry %d is empty", i+1)
		case !groupNamePattern.MatchString(name):
			problems.add("GROUPS: %q is not a valid prefix: a group's name is 1-20 letters and digits, starting with a letter (it prefixes the group's variables: ETH_RPC_URL)", raw)
		case slices.Contains(names, name):
			problems.add("GROUPS: %q is listed twice", name)
		default:
			if key := clashingKey(name); key != "" {
				problems.add("GROUPS: %q is not a valid prefix: %s is a variable of burnpoller, not group %s's; choose another name", name, key, name)
				continue
			}
			names = append(names, name)
		}
	}
	if len(names) > maxGroups {
		problems.add("GROUPS: %d groups, at most %d in one process", len(names), maxGroups)
	}
	if len(problems) > 0 {
		return nil, problems
	}
	return names, nil
}

// clashingKey is a variable of burnpoller that reads as one of group
// name's (RPC_URL for a group "rpc"), or "".
func clashingKey(name string) string {
	p := prefix(name) + "_"
	var clash []string
	for key := range keys {
		if strings.HasPrefix(key, p) {
			clash = append(clash, key)
		}
	}
	sort.Strings(clash)
	if len(clash) == 0 {
		return ""
	}
	return clash[0]
}

// groupConns is the most connections a pool needs so that no group ever
// waits for one another group holds: its loop's transaction and its
// contract backfill's, two per group, and two for the probes and the
// scrape.
func groupConns(groups int) int32 { return int32(min(2*groups+2, 100)) }

// loadGroups is Load with GROUPS: the process's variables unprefixed, each
// group's under its prefix.
func loadGroups(s Scope, names []string) (Set, []string) {
	proc := read("", func(f reflect.StructField) bool { return !isGroupField(f) })
	problems := proc.problems
	for _, p := range proc.cfg.validateProcess(s) {
		if !proc.failed[keyOf(p)] {
			problems = append(problems, p)
		}
	}
	if !proc.cfg.maxConnsSet {
		proc.cfg.DatabaseMaxConns = groupConns(len(names))
	} else if need := groupConns(len(names)); s == ScopeServe && proc.cfg.DatabaseMaxConns < need && !proc.failed["DATABASE_MAX_CONNS"] {
		problems = append(problems, fmt.Sprintf("DATABASE_MAX_CONNS: %d is less than 2 per group + 2 (%d with %d groups): a group whose node hangs could hold a connection another group needs; leave it unset or raise it",
			proc.cfg.DatabaseMaxConns, need, len(names)))
	}
	set := Set{Config: proc.cfg}
	var lines groupLines
	for _, name := range names {
		r := read(prefix(name), isGroupField)
		g := Group{Name: name, Config: withProcess(r.cfg, proc.cfg)}
		set.Groups = append(set.Groups, g)
		if s == ScopeMigrate {
			continue
		}
		for _, p := range r.problems {
			lines.add(g, p)
		}
		for _, p := range g.validateGroup() {
			if !r.failed[keyOf(p)] {
				lines.add(g, p)
			}
		}
	}
	problems = append(problems, lines.text()...)
	if s != ScopeMigrate {
		problems = append(problems, unprefixedOwn(names)...)
		problems = append(problems, sharedCursors(set.Groups, lines)...)
	}
	problems = append(problems, foreignGroups(names)...)
	set.Warnings = misspelt(names)
	return set, problems
}

// withProcess is group's configuration with the process's variables.
func withProcess(group, process Config) Config {
	out := reflect.ValueOf(&group).Elem()
	in := reflect.ValueOf(process)
	t := out.Type()
	for i := range t.NumField() {
		if f := t.Field(i); f.Tag.Get("envconfig") != "" && !isGroupField(f) {
			out.Field(i).Set(in.Field(i))
		}
	}
	group.maxConnsSet = process.maxConnsSet
	return group
}

// varName is the variable the user set for key in group g: the prefixed
// one, or the unprefixed one a shared variable fell back to; the prefixed
// one when neither is set.
func (g Group) varName(key string) (name string, shared bool) {
	if _, set := os.LookupEnv(g.Var(key)); set || !groupKeys[key] {
		return g.Var(key), false
	}
	if _, set := os.LookupEnv(key); set && !ownKeys[key] {
		return key, true
	}
	return g.Var(key), false
}

// groupVarPattern is a group variable's name in a problem's text.
var groupVarPattern = regexp.MustCompile(`\b[A-Z][A-Z0-9_]*[A-Z0-9]\b`)

// groupLines are problem lines of the groups: a problem of a shared
// variable that several groups read from one unprefixed variable is told
// once, naming them.
type groupLines struct {
	order  []string
	groups map[string][]string
	shared map[string]bool
}

// add records group g's problem p ("KEY: text", KEY unprefixed, or a
// parse problem naming the variable set).
func (l *groupLines) add(g Group, p string) {
	key, text, _ := strings.Cut(p, ":")
	name, shared := key, false
	if groupKeys[key] {
		name, shared = g.varName(key)
	}
	// Other variables the text names are the group's too.
	text = groupVarPattern.ReplaceAllStringFunc(text, func(k string) string {
		if !groupKeys[k] {
			return k
		}
		n, _ := g.varName(k)
		return n
	})
	line := name + ":" + text
	if l.groups == nil {
		l.groups, l.shared = map[string][]string{}, map[string]bool{}
	}
	if _, seen := l.groups[line]; !seen {
		l.order = append(l.order, line)
	}
	l.groups[line] = append(l.groups[line], g.Name)
	l.shared[line] = shared
}

// failedOn says whether one of group name's problems names one of keys.
func (l groupLines) failedOn(g Group, keys ...string) bool {
	for _, line := range l.order {
		if !slices.Contains(l.groups[line], g.Name) {
			continue
		}
		for _, k := range keys {
			if n, _ := g.varName(k); keyOf(line) == n {
				return true
			}
		}
	}
	return false
}

func (l groupLines) text() []string {
	out := make([]string, 0, len(l.order))
	for _, line := range l.order {
		gs := l.groups[line]
		switch {
		case !l.shared[line]:
		case len(gs) == 1:
			line += " (group " + gs[0] + ")"
		default:
			line += " (groups " + strings.Join(gs, ", ") + ")"
		}
		out = append(out, line)
	}
	return out
}

// unprefixedOwn refuses an unprefixed variable that each group must set
// under its own prefix: it would read as every group's node, chain or
// contract.
func unprefixedOwn(names []string) []string {
	var p problems
	for _, key := range sortedKeys(ownKeys) {
		if _, set := os.LookupEnv(key); !set {
			continue
		}
		var each []string
		for _, n := range names {
			each = append(each, prefix(n)+"_"+key)
		}
		p.add("%s: with GROUPS each group sets its own (%s); unset %s", key, strings.Join(each, ", "), key)
	}
	return p
}

// sharedCursors refuses two groups with one cursor: one of them would
// never write, or both would follow one ledger position with two
// configurations.
func sharedCursors(groups []Group, lines groupLines) []string {
	var p problems
	first := map[string]string{}
	for _, g := range groups {
		if lines.failedOn(g, "CHAIN_ID", "BURN_CONTRACT", "CURSOR_ID") {
			continue
		}
		id := g.GroupCursor()
		if other, dup := first[id]; dup {
			key := "BURN_CONTRACT"
			if g.CursorID != "" {
				key = "CURSOR_ID"
			}
			p.add("%s: groups %s and %s have the same cursor (%s); each group needs its own: remove one, or give it a CURSOR_ID of its own", g.Var(key), other, g.Name, id)
			continue
		}
		first[id] = g.Name
	}
	return p
}

// foreignGroups refuses a group variable whose prefix names no group in
// GROUPS (POLY_RPC_URL with GROUPS=eth,base): a group left out of GROUPS
// by mistake would not be served.
func foreignGroups(names []string) []string {
	var p problems
	for _, v := range environNames() {
		if keys[v] {
			continue
		}
		pre, ok := groupPrefixOf(v)
		if !ok || slices.Contains(names, strings.ToLower(pre)) {
			continue
		}
		p.add("%s: group %s is not in GROUPS (%s); add it to GROUPS or unset %s", v, strings.ToLower(pre), strings.Join(names, ","), v)
	}
	return p
}

// groupPrefixOf is the prefix of v when v reads as a group's variable
// (PREFIX_KEY, KEY a group variable).
func groupPrefixOf(v string) (string, bool) {
	for i := range len(v) {
		if v[i] == '_' && i > 0 && groupKeys[v[i+1:]] {
			return v[:i], true
		}
	}
	return "", false
}

// misspelt warns of variables under a group's prefix that are not one of
// its variables (ETH_RPC_ULR), and of unprefixed ones a letter or two from
// a variable's name: a typo otherwise reads as the default.
func misspelt(names []string) []string {
	var out []string
	for _, v := range environNames() {
		if keys[v] {
			continue
		}
		if w, ok := misspeltGroupVariable(v, names); ok {
			if w != "" {
				out = append(out, w)
			}
			continue
		}
		if _, ok := groupPrefixOf(v); ok {
			continue // a group's variable (strayGroupVariables)
		}
		if near := nearest(v, keys); near != "" && len(v) >= 5 {
			out = append(out, fmt.Sprintf("%s is not a variable of burnpoller; did you mean %s?", v, near))
		}
	}
	return out
}

// misspeltGroupVariable says whether v is under the prefix of one of the
// groups names, with a warning when it is not one of that group's
// variables.
func misspeltGroupVariable(v string, names []string) (string, bool) {
	for _, n := range names {
		rest, ok := strings.CutPrefix(v, prefix(n)+"_")
		if !ok {
			continue
		}
		if groupKeys[rest] {
			return "", true
		}
		w := fmt.Sprintf("%s is not a variable of group %s", v, n)
		if near := nearest(rest, groupKeys); near != "" {
			w += fmt.Sprintf("; did you mean %s_%s?", prefix(n), near)
		}
		return w, true
	}
	return "", false
}

// strayGroupVariables warns, without GROUPS, of variables that read as a
// group's (ETH_RPC_URL): they are ignored until GROUPS names the group.
func strayGroupVariables() []string {
	var out []string
	for _, v := range environNames() {
		if keys[v] {
			continue
		}
		if pre, ok := groupPrefixOf(v); ok && groupNamePattern.MatchString(strings.ToLower(pre)) {
			out = append(out, fmt.Sprintf("%s reads as a variable of group %s, but GROUPS is not set: it is ignored", v, strings.ToLower(pre)))
		}
	}
	return append(out, misspelt(nil)...)
}

// environNames are the names of the environment's variables, sorted.
func environNames() []string {
	var out []string
	for _, kv := range os.Environ() {
		if name, _, ok := strings.Cut(kv, "="); ok && name != "" {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// nearest is the name in known within two edits of v, "" if none is or v
// is one of them.
func nearest(v string, known map[string]bool) string {
	best, bestD := "", 3
	for _, k := range sortedKeys(known) {
		if d := distance(v, k); d > 0 && d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

// distance is the Levenshtein distance between a and b.
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
