package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// printVersion prints the version line of this binary.
func printVersion(w io.Writer) {
	info, ok := debug.ReadBuildInfo()
	fmt.Fprintln(w, versionLine(version, info, ok, runtime.Version()))
}

// versionLine is what `poller version` prints: "burnpoller <version>
// (revision <commit>, <go version>)", with ", modified" after the commit
// when the work tree had changes not committed. The commit is the one go
// build stamps into a binary built in a git checkout (vcs.revision; see
// `go help buildinfo`), "unknown" when the binary carries none (go run,
// go test, -buildvcs=false, a source tree without .git).
func versionLine(version string, info *debug.BuildInfo, ok bool, goVersion string) string {
	rev, modified := vcs(info, ok)
	if modified {
		rev += ", modified"
	}
	return fmt.Sprintf("burnpoller %s (revision %s, %s)", version, rev, goVersion)
}

// revision is the commit this binary was built from, "unknown" when it
// carries none; the build_info metric's label.
func revision() string {
	rev, _ := vcs(debug.ReadBuildInfo())
	return rev
}

// vcs reads the commit a binary was built from, and whether the work tree
// had changes not committed, from its build information.
func vcs(info *debug.BuildInfo, ok bool) (revision string, modified bool) {
	revision = "unknown"
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
