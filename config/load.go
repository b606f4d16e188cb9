package config

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"time"

	"github.com/kelseyhightower/envconfig"

	"github.com/burnpoller/burnpoller/chain"
)

// Load reads the environment and returns the configuration with every
// problem found, one line each naming its variable, so that a user fixes
// them all in one go. Without GROUPS the process has one group, read from
// the unprefixed variables exactly as before GROUPS existed; with GROUPS,
// each group reads its variables under its prefix (see Config).
func Load(s Scope) (Set, []string) {
	names, nameProblems := parseGroups(os.Getenv("GROUPS"))
	if len(names) == 0 {
		// Without GROUPS (or with a GROUPS that does not parse: its
		// problem alone is told, as the groups it names are unknown).
		cfg, problems := loadOne(s)
		set := Set{Config: cfg, Groups: []Group{{Config: cfg}}, Warnings: strayGroupVariables()}
		if len(nameProblems) > 0 {
			return set, nameProblems
		}
		return set, problems
	}
	return loadGroups(s, names)
}

// loadOne is the configuration without GROUPS: every variable unprefixed.
func loadOne(s Scope) (Config, []string) {
	r := read("", func(reflect.StructField) bool { return true })
	cfg, problems := r.cfg, r.problems
	for _, p := range cfg.validate(s) {
		// A variable that did not parse was reported already.
		if !r.failed[keyOf(p)] {
			problems = append(problems, p)
		}
	}
	return cfg, problems
}

// keyOf is the variable a problem line names.
func keyOf(problem string) string {
	key, _, _ := strings.Cut(problem, ":")
	return key
}

// isGroupField says whether f is a group's variable; own says one a group
// must set under its own prefix.
func isGroupField(f reflect.StructField) bool { return f.Tag.Get("group") != "" }

func isOwnField(f reflect.StructField) bool { return f.Tag.Get("group") == "own" }

// reading is the variables of Config that one call of read processed.
type reading struct {
	cfg Config
	// problems are the parse problems, each naming the variable set.
	problems []string
	// failed are the keys (unprefixed) whose value did not parse: they
	// count as unset.
	failed map[string]bool
	// set says whether the user set key for this reading: under the
	// prefix, or unprefixed for a shared variable.
	set func(key string) bool
}

// read runs envconfig with prefix on the variables of Config that include
// selects, collecting every unparseable variable rather than stopping at
// the first, and never changes the environment: after a variable fails to
// parse, envconfig runs again on the variables not failed so far (a struct
// of those fields, made with reflect.StructOf), and a failed variable takes
// its default, as if unset. With a prefix, envconfig reads PREFIX_KEY and
// falls back to KEY (its prefix mechanism); an own variable is read as
// PREFIX_KEY alone, so that a group never takes another's node or contract
// from an unprefixed variable.
func read(prefix string, include func(reflect.StructField) bool) reading {
	r := reading{failed: map[string]bool{}}
	var values []reflect.Value
	if prefix == "" {
		values = r.process("", include, nil)
	} else {
		values = r.process(prefix, func(f reflect.StructField) bool { return include(f) && !isOwnField(f) }, nil)
		values = append(values, r.process("", func(f reflect.StructField) bool { return include(f) && isOwnField(f) }, func(key string) string {
			return prefix + "_" + key
		})...)
	}
	r.cfg = fromFields(values, r.failed)
	// A variable that did not parse counts as unset: it gets the derived
	// value, and only its parse problem is reported.
	r.set = func(key string) bool {
		if r.failed[key] {
			return false
		}
		if prefix == "" {
			_, set := os.LookupEnv(key)
			return set
		}
		if _, set := os.LookupEnv(prefix + "_" + key); set {
			return true
		}
		_, set := os.LookupEnv(key)
		return set && !ownKeys[key]
	}
	r.cfg.deriveTimeouts(r.set)
	r.cfg.applyChainDefaults(r.set)
	r.cfg.maxBlockRangeSet = r.set("MAX_BLOCK_RANGE")
	r.cfg.maxConnsSet = r.set("DATABASE_MAX_CONNS")
	return r
}

// process runs envconfig with prefix on the fields include selects, each
// read under rename(key) when rename is set, until every field left
// parses; it records the failed ones in r and returns what was read.
func (r *reading) process(prefix string, include func(reflect.StructField) bool, rename func(string) string) []reflect.Value {
	for {
		fields := parsedFields(r.failed, include, rename)
		err := envconfig.Process(prefix, fields.Addr().Interface())
		var pe *envconfig.ParseError
		if errors.As(err, &pe) {
			field, _ := fields.Type().FieldByName(pe.FieldName)
			key := field.Tag.Get("key")
			// The value came from the unprefixed variable when the
			// prefixed one is unset: name the one the user set.
			if _, ok := os.LookupEnv(pe.KeyName); !ok {
				pe.KeyName = key
			}
			r.problems = append(r.problems, parseProblem(pe))
			r.failed[key] = true
			continue
		}
		if err != nil {
			r.problems = append(r.problems, err.Error())
		}
		return []reflect.Value{fields}
	}
}

// ownKeys are the variables a group sets under its own prefix only.
var ownKeys = func() map[string]bool {
	out := map[string]bool{}
	t := reflect.TypeFor[Config]()
	for i := range t.NumField() {
		if f := t.Field(i); isOwnField(f) {
			out[f.Tag.Get("envconfig")] = true
		}
	}
	return out
}()

// parsedFields is a zero value of a struct of Config's variables that
// include selects, except those in failed. Processed by envconfig, it
// reads them as Config would; rename, when set, gives the variable each is
// read from instead of its key. Each field's tag keeps its key under
// "key".
func parsedFields(failed map[string]bool, include func(reflect.StructField) bool, rename func(string) string) reflect.Value {
	t := reflect.TypeFor[Config]()
	var fields []reflect.StructField
	for i := range t.NumField() {
		f := t.Field(i)
		key := f.Tag.Get("envconfig")
		if key == "" || failed[key] || !include(f) {
			continue
		}
		name := key
		if rename != nil {
			name = rename(key)
		}
		tag := fmt.Sprintf(`envconfig:%q key:%q`, name, key)
		if def, ok := f.Tag.Lookup("default"); ok {
			tag += fmt.Sprintf(` default:%q`, def)
		}
		f.Tag = reflect.StructTag(tag)
		fields = append(fields, f)
	}
	return reflect.New(reflect.StructOf(fields)).Elem()
}

// fromFields copies what envconfig read into a Config; the variables in
// failed get their defaults, as envconfig gives an unset variable.
func fromFields(values []reflect.Value, failed map[string]bool) Config {
	var cfg Config
	out := reflect.ValueOf(&cfg).Elem()
	for _, v := range values {
		for i := range v.NumField() {
			out.FieldByName(v.Type().Field(i).Name).Set(v.Field(i))
		}
	}
	t := reflect.TypeFor[Config]()
	for i := range t.NumField() {
		f := t.Field(i)
		if def := f.Tag.Get("default"); failed[f.Tag.Get("envconfig")] && def != "" {
			setDefault(out.Field(i), def)
		}
	}
	return cfg
}

// setDefault gives field its default tag's value, parsed as envconfig
// parses it (the defaults are this file's own, and always parse).
func setDefault(field reflect.Value, def string) {
	one := reflect.New(reflect.StructOf([]reflect.StructField{{
		// A name no environment sets: envconfig gives it the default.
		Name: "V", Type: field.Type(), Tag: reflect.StructTag(`envconfig:"BURNPOLLER_DEFAULT_OF_A_BAD_VARIABLE" default:"` + def + `"`),
	}}))
	_ = envconfig.Process("", one.Interface())
	field.Set(one.Elem().Field(0))
}

// The most LOCK_WAIT and RPC_TIMEOUT are when derived from TX_TIMEOUT.
const (
	maxDerivedLockWait   = 5 * time.Second
	maxDerivedRPCTimeout = 10 * time.Second
)

// deriveTimeouts fills in LOCK_WAIT and RPC_TIMEOUT when the user did not
// set them: min(5s, TX_TIMEOUT/6) and min(10s, TX_TIMEOUT/3), whole
// milliseconds. The client's deadline for a range's transaction is
// TX_TIMEOUT, and it covers the wait for the cursor lock and the node's
// calls made under the lock; the defaults keep the proportions of the
// default TX_TIMEOUT=30s (5s and 10s), so that a full lock wait plus a full
// RPC call use at most half of any TX_TIMEOUT, leaving the rest for the
// inserts and a retried call. A longer TX_TIMEOUT keeps 5s and 10s: a
// longer lock wait only delays a standby's next try, and a longer call only
// delays the retry on another endpoint.
func (c *Config) deriveTimeouts(set func(key string) bool) {
	c.lockWaitSet, c.rpcTimeoutSet = set("LOCK_WAIT"), set("RPC_TIMEOUT")
	if !c.lockWaitSet {
		c.LockWait = min(maxDerivedLockWait, (c.TxTimeout / 6).Truncate(time.Millisecond))
	}
	if !c.rpcTimeoutSet {
		c.RPCTimeout = min(maxDerivedRPCTimeout, (c.TxTimeout / 3).Truncate(time.Millisecond))
	}
}

// applyChainDefaults takes FINALITY, CONFIRMATIONS and MAX_BLOCK_RANGE from
// the table of well-known chains when CHAIN_ID is in it and the user did not
// set them; other chains keep the variables' defaults.
func (c *Config) applyChainDefaults(set func(key string) bool) {
	d, ok := chain.KnownChain(c.ChainID)
	if !ok {
		return
	}
	c.fromChain = map[string]chain.Defaults{}
	if !set("FINALITY") {
		c.Finality = string(d.Finality)
		c.fromChain["FINALITY"] = d
	}
	if !set("CONFIRMATIONS") && d.Finality == chain.FinalityLatest {
		c.Confirmations = d.Confirmations
		c.fromChain["CONFIRMATIONS"] = d
	}
	if !set("MAX_BLOCK_RANGE") {
		c.MaxBlockRange = d.MaxBlockRange
		c.fromChain["MAX_BLOCK_RANGE"] = d
	}
}

func parseProblem(pe *envconfig.ParseError) string {
	want := map[string]string{
		"uint64":        "a whole number >= 0",
		"int64":         "a whole number",
		"int":           "a whole number",
		"int32":         "a whole number",
		"time.Duration": "a duration such as 500ms, 2s or 1m",
		"bool":          "true or false",
	}[pe.TypeName]
	if want == "" {
		want = "a " + pe.TypeName
	}
	return fmt.Sprintf("%s: %q is not %s", pe.KeyName, pe.Value, want)
}
