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
	"os/exec"
	"path/filepath"
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
