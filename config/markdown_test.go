package config

import (
	"bytes"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
)

// configDocPath is the generated reference of every variable.
const configDocPath = "../docs/configuration.md"

// TestConfigurationDocIsGenerated: docs/configuration.md is exactly what
// `poller config --markdown` prints, so a variable added, renamed or
// described anew in Config shows in the docs or fails here.
func TestConfigurationDocIsGenerated(t *testing.T) {
	t.Parallel()
	var want bytes.Buffer
	if err := Markdown(&want); err != nil {
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

// TestMarkdownIgnoresTheEnvironment: the page does not depend on the
// environment it is printed in, and prints nothing from it.
func TestMarkdownIgnoresTheEnvironment(t *testing.T) {
	setEnv(t, validEnv)
	t.Setenv("PAYMENT_HOOK_SQL", "SELECT 'do-not-print-me'")
	var got, want bytes.Buffer
	if err := Markdown(&got); err != nil {
		t.Fatal(err)
	}
	setEnv(t, nil)
	if err := Markdown(&want); err != nil {
		t.Fatal(err)
	}
	if got.String() != want.String() {
		t.Errorf("Markdown with a configuration set printed another page than without one")
	}
	for _, secret := range []string{"do-not-print-me", "pw@"} {
		if strings.Contains(got.String(), secret) {
			t.Errorf("Markdown printed %q from the environment", secret)
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
