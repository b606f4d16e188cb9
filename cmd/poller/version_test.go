package main

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/burnpoller/burnpoller/internal/pgtest"
)

func TestVersionLine(t *testing.T) {
	t.Parallel()
	const rev = "9a757fb6b7123cc44dd3a5ffb4de59807af2b3cd"
	settings := func(kv ...string) *debug.BuildInfo {
		info := &debug.BuildInfo{GoVersion: "go1.26.8"}
		for i := 0; i < len(kv); i += 2 {
			info.Settings = append(info.Settings, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return info
	}
	tests := []struct {
		name string
		info *debug.BuildInfo
		ok   bool
		want string
	}{
		{"clean checkout", settings("vcs", "git", "vcs.revision", rev, "vcs.modified", "false"), true,
			"burnpoller v1.2.3 (revision " + rev + ", go1.26.8)"},
		{"uncommitted changes", settings("vcs", "git", "vcs.revision", rev, "vcs.modified", "true"), true,
			"burnpoller v1.2.3 (revision " + rev + ", modified, go1.26.8)"},
		{"no VCS stamp (go run, -buildvcs=false)", settings("-compiler", "gc"), true,
			"burnpoller v1.2.3 (revision unknown, go1.26.8)"},
		{"modified without a revision says nothing of it", settings("vcs.modified", "true"), true,
			"burnpoller v1.2.3 (revision unknown, go1.26.8)"},
		{"no build information", nil, false,
			"burnpoller v1.2.3 (revision unknown, go1.26.8)"},
	}
	// Built outside a checkout with the commit stamped (the Docker image).
	stampedTests := []struct {
		name string
		info *debug.BuildInfo
		want string
	}{
		{"stamped, no VCS information", settings("-compiler", "gc"), "burnpoller v1.2.3 (revision 0123abc, go1.26.8)"},
		{"go build's own stamp wins", settings("vcs", "git", "vcs.revision", rev, "vcs.modified", "false"),
			"burnpoller v1.2.3 (revision " + rev + ", go1.26.8)"},
	}
	for _, tt := range stampedTests {
		if got := versionLine("v1.2.3", "0123abc", tt.info, true, "go1.26.8"); got != tt.want {
			t.Errorf("%s: versionLine = %q, want %q", tt.name, got, tt.want)
		}
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := versionLine("v1.2.3", "", tt.info, tt.ok, "go1.26.8"); got != tt.want {
				t.Errorf("versionLine = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestVersionOfABinaryBuiltInTheCheckout builds the binary as `go build`
// does in a git checkout and runs `poller version`: it names the commit
// HEAD is at.
func TestVersionOfABinaryBuiltInTheCheckout(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	head, err := exec.CommandContext(ctx, "git", "rev-parse", "HEAD").Output()
	if err != nil {
		if pgtest.CI() {
			t.Fatalf("CI=true but not in a git checkout (git rev-parse HEAD: %v)", err)
		}
		t.Skipf("not in a git checkout: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "poller")
	// -buildvcs=true: the machine's GOFLAGS may turn stamping off.
	if out, err := exec.CommandContext(ctx, "go", "build", "-buildvcs=true", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.CommandContext(ctx, bin, "version").Output()
	if err != nil {
		t.Fatalf("poller version: %v", err)
	}
	line := strings.TrimSpace(string(out))
	wantPrefix := "burnpoller dev (revision " + strings.TrimSpace(string(head))
	if !strings.HasPrefix(line, wantPrefix) || !strings.HasSuffix(line, ", "+runtime.Version()+")") {
		t.Fatalf("poller version printed %q, want %q…, %s)", line, wantPrefix, runtime.Version())
	}
	// Whether the tree has changes decides ", modified"; git says which.
	dirty, err := exec.CommandContext(ctx, "git", "status", "--porcelain").Output()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Contains(line, ", modified,"), len(bytes.TrimSpace(dirty)) > 0; got != want {
		t.Errorf("poller version printed %q; the work tree has changes: %v", line, want)
	}
}
