package main

import (
	"bytes"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/burnpoller/burnpoller/config"
)

// setEnv clears every variable the configuration reads, then sets env.
func setEnv(t *testing.T, env map[string]string) {
	t.Helper()
	ct := reflect.TypeFor[config.Config]()
	for i := range ct.NumField() {
		key := ct.Field(i).Tag.Get("envconfig")
		if key == "" {
			continue
		}
		t.Setenv(key, "")
		os.Unsetenv(key)
	}
	for k, v := range env {
		t.Setenv(k, v)
	}
}

// TestConfigMarkdownCommand: `poller config --markdown` prints the page
// whatever the environment, and refuses other arguments.
func TestConfigMarkdownCommand(t *testing.T) {
	setEnv(t, map[string]string{"DATABASE_URL": "postgres://u:pw@h/db", "PAYMENT_HOOK_SQL": "SELECT 'do-not-print-me'"})
	var stdout, stderr bytes.Buffer
	if code := run([]string{"config", "--markdown"}, &stdout, &stderr); code != exitOK {
		t.Fatalf("poller config --markdown: exit %d (%s)", code, stderr.String())
	}
	var want bytes.Buffer
	if err := config.Markdown(&want); err != nil {
		t.Fatal(err)
	}
	if stdout.String() != want.String() {
		t.Errorf("poller config --markdown printed another page than config.Markdown")
	}
	for _, args := range [][]string{{"config", "--bogus"}, {"config", "extra"}} {
		if code := run(args, &stdout, &stderr); code != exitUsage {
			t.Errorf("poller %v: exit %d, want %d", args, code, exitUsage)
		}
	}
}

func TestUsageErrors(t *testing.T) {
	tests := []struct {
		args []string
		want int
	}{
		{[]string{"bogus"}, exitUsage},
		{[]string{"run", "extra"}, exitUsage},
		{[]string{"version"}, exitOK},
		{[]string{"help"}, exitOK},
	}
	for _, tt := range tests {
		var stdout, stderr bytes.Buffer
		if code := run(tt.args, &stdout, &stderr); code != tt.want {
			t.Errorf("poller %v: exit %d, want %d (%s)", tt.args, code, tt.want, stderr.String())
		}
	}
	for args, want := range map[string]string{
		"backfill --from -1 --to 10": "poller backfill: --from -1 is not a block number",
		"verify --from 20 --to 10":   "poller verify: --from 20 is after --to 10",
		"verify --from 0":            "poller verify: --to is required",
	} {
		var stdout, stderr bytes.Buffer
		if code := run(strings.Fields(args), &stdout, &stderr); code != exitUsage || !strings.Contains(stderr.String(), want) {
			t.Errorf("poller %s: exit %d, %q; want %d and %q", args, code, stderr.String(), exitUsage, want)
		}
	}
	setEnv(t, nil)
	var stdout, stderr bytes.Buffer
	if code := run(nil, &stdout, &stderr); code != exitUsage {
		t.Fatalf("poller with no config: exit %d, want %d", code, exitUsage)
	}
	if lines := strings.Count(stderr.String(), "\n"); lines != 4 {
		t.Fatalf("want one line for each of the 4 required variables, got:\n%s", stderr.String())
	}
}
