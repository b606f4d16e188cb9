package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// buildRevision is the commit a build made outside a git checkout names
// with -ldflags "-X main.buildRevision=<commit>": the Docker image, whose
// build context leaves .git out, gets it from the REVISION build argument.
// A revision stamped by go build itself wins.
var buildRevision string

// printVersion prints the version line of this binary.
func printVersion(w io.Writer) {
	info, ok := debug.ReadBuildInfo()
	fmt.Fprintln(w, versionLine(version, buildRevision, info, ok, runtime.Version()))
}

// versionLine is what `poller version` prints: "burnpoller <version>
// (revision <commit>, <go version>)", with ", modified" after the commit
// when the work tree had changes not committed. The commit is the one go
// build stamps into a binary built in a git checkout (vcs.revision; see
// `go help buildinfo`), else stamped (buildRevision), "unknown" when the
// binary carries neither (go run, go test, -buildvcs=false, a source tree
// without .git).
func versionLine(version, stamped string, info *debug.BuildInfo, ok bool, goVersion string) string {
	rev, modified := vcs(info, ok, stamped)
	if modified {
		rev += ", modified"
	}
	return fmt.Sprintf("burnpoller %s (revision %s, %s)", version, rev, goVersion)
}

// revision is the commit this binary was built from, "unknown" when it
// carries none; the build_info metric's label.
func revision() string {
	info, ok := debug.ReadBuildInfo()
	rev, _ := vcs(info, ok, buildRevision)
	return rev
}

// vcs reads the commit a binary was built from, and whether the work tree
// had changes not committed, from its build information, else stamped.
func vcs(info *debug.BuildInfo, ok bool, stamped string) (revision string, modified bool) {
	revision = "unknown"
	if stamped != "" {
		revision = stamped
	}
	if !ok || info == nil {
		return revision, false
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			if s.Value != "" {
				revision = s.Value
			}
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	return revision, modified && revision != "unknown"
}

// release names this binary's release in replica_members and in the
// contract steps it runs (the release an older replica is told to roll
// to): "<version> (revision <commit>)", as `poller version` says it.
func release() string {
	info, ok := debug.ReadBuildInfo()
	rev, modified := vcs(info, ok, buildRevision)
	if modified {
		rev += ", modified"
	}
	return fmt.Sprintf("%s (revision %s)", version, rev)
}
