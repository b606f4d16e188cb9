// Package harness runs this module's binaries as child processes and reads
// what they expose: it builds a command, starts it with an environment and
// captured output, hands out free ports, composes a poller replica's
// environment, scrapes /metrics, and stops a process with a signal.
//
// The integration tests and cmd/bench share it. Nothing here takes a
// testing.T: every failure is an error, and a test turns it into t.Fatal.
package harness

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Module is this module's import path; Build builds its commands.
const Module = "github.com/burnpoller/burnpoller"

// Build builds the command ./cmd/<name> of this module into dir/<name>, with
// the race detector if race is set, and returns the binary's path. It runs
// the go command, so the working directory must lie inside the module.
func Build(ctx context.Context, dir, name string, race bool) (string, error) {
	bin := filepath.Join(dir, name)
	if err := BuildPackage(ctx, Module+"/cmd/"+name, bin, race); err != nil {
		return "", err
	}
	return bin, nil
}

// BuildPackage builds the main package pkg (an import path or a ./relative
// directory) into the file out, with the race detector if race is set. The
// go command's output is part of the error.
func BuildPackage(ctx context.Context, pkg, out string, race bool) error {
	args := []string{"build", "-o", out}
	if race {
		args = append(args, "-race")
	}
	cmd := exec.CommandContext(ctx, "go", append(args, pkg)...)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building %s: %w\n%s", pkg, err, b)
	}
	return nil
}

// PreviousRelease is the commit of the release landed before this tree's
// migrations: the one whose replicas run beside this tree's during an
// upgrade, which its migrations must not break (docs/development.md,
// "Adding a migration"). Change it when a release lands.
const PreviousRelease = "7aa21c56f3929cac84286ca0c8581ad3d5bcd928"

// BuildRelease builds the command ./cmd/<name> of commit rev of this
// repository's history into the file out: rev's tree, taken with git
// archive into a directory of its own, built with its own go.mod. A clone
// whose history lacks rev (a shallow one) is an error saying so. The
// working directory must lie inside the repository.
func BuildRelease(ctx context.Context, rev, name, out string) error {
	if b, err := exec.CommandContext(ctx, "git", "cat-file", "-e", rev+"^{commit}").CombinedOutput(); err != nil {
		return fmt.Errorf("release %s is not in this clone's history (a shallow clone? git fetch --unshallow brings it): %w\n%s", rev, err, b)
	}
	src, err := os.MkdirTemp("", "burnpoller-release-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(src)
	top, err := exec.CommandContext(ctx, "git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		return fmt.Errorf("finding the repository: %w", err)
	}
	// From the top: run in a subdirectory, git archive takes only that.
	archive := filepath.Join(src, "tree.tar")
	git := exec.CommandContext(ctx, "git", "archive", "-o", archive, rev)
	git.Dir = strings.TrimSpace(string(top))
	if b, err := git.CombinedOutput(); err != nil {
		return fmt.Errorf("taking release %s's tree: %w\n%s", rev, err, b)
	}
	if b, err := exec.CommandContext(ctx, "tar", "-xf", archive, "-C", src).CombinedOutput(); err != nil {
		return fmt.Errorf("unpacking release %s's tree: %w\n%s", rev, err, b)
	}
	abs, err := filepath.Abs(out)
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-o", abs, "-ldflags", "-X main.buildRevision="+rev, "./cmd/"+name)
	cmd.Dir = src
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building release %s's %s: %w\n%s", rev, name, err, b)
	}
	return nil
}
