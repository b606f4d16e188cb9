package main

import (
	"bytes"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
)

// configDocPath is the generated reference of every variable.
const configDocPath = "../../docs/configuration.md"

// TestConfigurationDocIsGenerated: docs/configuration.md is exactly what
// `poller config --markdown` prints, so a variable added, renamed or
// described anew in Config shows in the docs or fails here.
func TestConfigurationDocIsGenerated(t *testing.T) {
	t.Parallel()
	var want bytes.Buffer
	if err := configMarkdown(&want); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(configDocPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("docs/configuration.md differs from `poller config --markdown` (%s); regenerate it from the repository root:\n"+
			"  go run ./cmd/poller config --markdown > docs/configuration.md", firstDifference(string(got), want.String()))
	}
}

// firstDifference describes the first line where got and want differ.
func firstDifference(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := range max(len(g), len(w)) {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			return fmt.Sprintf("line %d: the file has %q, the command prints %q", i+1, gl, wl)
		}
	}
	return "no line differs"
}

// TestConfigMarkdownCommand: the command prints the page, and the page
// does not depend on the environment it runs in.
func TestConfigMarkdownCommand(t *testing.T) {
	setEnv(t, validEnv)
	t.Setenv("PAYMENT_HOOK_SQL", "SELECT 'do-not-print-me'")
	var stdout, stderr bytes.Buffer
	if code := run([]string{"config", "--markdown"}, &stdout, &stderr); code != exitOK {
		t.Fatalf("poller config --markdown: exit %d (%s)", code, stderr.String())
	}
	var want bytes.Buffer
	setEnv(t, nil)
	if err := configMarkdown(&want); err != nil {
		t.Fatal(err)
	}
	if stdout.String() != want.String() {
		t.Errorf("poller config --markdown with a configuration set printed another page than without one")
	}
	for _, secret := range []string{"do-not-print-me", "pw@"} {
		if strings.Contains(stdout.String(), secret) {
			t.Errorf("poller config --markdown printed %q from the environment", secret)
		}
	}
	for _, args := range [][]string{{"config", "--bogus"}, {"config", "extra"}} {
		if code := run(args, &stdout, &stderr); code != exitUsage {
			t.Errorf("poller %v: exit %d, want %d", args, code, exitUsage)
		}
	}
}

// TestConfigDocsCoverEveryVariable: every variable links to the page that
// says more about it, and no link names a variable Config lacks.
func TestConfigDocsCoverEveryVariable(t *testing.T) {
	t.Parallel()
	keys := map[string]bool{}
	ct := reflect.TypeFor[Config]()
	for i := range ct.NumField() {
		key := ct.Field(i).Tag.Get("envconfig")
		if key == "" {
			continue
		}
		keys[key] = true
		if configDocs[key] == "" {
			t.Errorf("%s has no page in configDocs", key)
		}
	}
	for key := range configDocs {
		if !keys[key] {
			t.Errorf("configDocs names %s, which Config does not read", key)
		}
	}
}
