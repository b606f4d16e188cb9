package config

import (
	"cmp"
	"fmt"
	"io"
	"os"
	"reflect"
	"strings"
	"text/tabwriter"

	"github.com/burnpoller/burnpoller/chain"
	"github.com/burnpoller/burnpoller/database"
	"github.com/burnpoller/burnpoller/webhooks"
)

// Print writes every variable with its default, its current value
// (secrets redacted) and its meaning; with GROUPS, the process's variables
// and then each group's, under their prefixed names, showing where a
// group's value came from (its own variable, the unprefixed one every
// group shares, a default).
func Print(w io.Writer) error {
	// The values derived from others, as the loader derives them.
	set, _ := Load(ScopeRun)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "VARIABLE\tDEFAULT\tVALUE\tMEANING")
	t := reflect.TypeFor[Config]()
	if !set.Named() {
		g := set.Groups[0]
		for i := range t.NumField() {
			printRow(tw, g, t.Field(i), reflect.ValueOf(g.Config).Field(i))
		}
		return tw.Flush()
	}
	for i := range t.NumField() {
		if f := t.Field(i); !isGroupField(f) {
			printRow(tw, Group{Config: set.Config}, f, reflect.ValueOf(set.Config).Field(i))
		}
	}
	for _, g := range set.Groups {
		fmt.Fprintf(tw, "\t\t\t\ngroup %s\t\t\t\n", g.Name)
		for i := range t.NumField() {
			if f := t.Field(i); isGroupField(f) {
				printRow(tw, g, f, reflect.ValueOf(g.Config).Field(i))
			}
		}
	}
	return tw.Flush()
}

// printRow writes variable f of group g (the process's own, for g without
// a name) with the value it resolved to.
func printRow(tw io.Writer, g Group, f reflect.StructField, resolved reflect.Value) {
	tag := f.Tag
	key := tag.Get("envconfig")
	if key == "" {
		return
	}
	name, from := key, key
	if isGroupField(f) {
		name = g.Var(key)
		from, _ = g.varName(key)
	}
	value, isSet := os.LookupEnv(from)
	d, fromChain := g.fromChain[key]
	switch {
	case !isSet && fromChain:
		value = fmt.Sprintf("(%s) %v: %s", d.Name, resolved.Interface(), d.Reason)
	case !isSet && tag.Get("derived") != "":
		value = fmt.Sprintf("(default) %v", resolved.Interface())
	case !isSet:
		value = "(default)"
	case tag.Get("secret") == "true":
		value = redactSecret(key, value)
	}
	if from != name {
		value = "(" + from + ") " + value
	}
	def := cmp.Or(tag.Get("default"), tag.Get("derived"), "-")
	fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", name, def, value, tag.Get("desc"))
}

// redactSecret shows a secret variable's shape without its secret parts.
// Any other secret variable (PAYMENT_HOOK_SQL, which may hold a dblink
// password) shows only that it is set.
func redactSecret(key, value string) string {
	switch key {
	case "RPC_WS_URL":
		return chain.RedactURL(value)
	case "RPC_URL":
		var parts []string
		for _, u := range strings.Split(value, ",") {
			parts = append(parts, chain.RedactURL(strings.TrimSpace(u)))
		}
		return strings.Join(parts, ",")
	case "DATABASE_URL", "DATABASE_DIRECT_URL":
		return database.Redact(value)
	case "WEBHOOK_URL":
		eps, err := webhooks.ParseEndpoints(value)
		if err != nil {
			return "(set, unparseable, redacted)"
		}
		labels := make([]string, len(eps))
		for i, e := range eps {
			labels[i] = e.Label
		}
		return strings.Join(labels, ",")
	}
	return "(set, redacted)"
}
