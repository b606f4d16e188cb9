package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/burnpoller/burnpoller/config"
)

// cmdConfigArgs is `poller config [--markdown]`.
func cmdConfigArgs(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("poller config", flag.ContinueOnError)
	fs.SetOutput(stderr)
	markdown := fs.Bool("markdown", false, "print docs/configuration.md: every variable with its default and meaning, from this binary's own descriptions (the environment is not read)")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "poller config: unexpected arguments %q\n%s", fs.Args(), usage)
		return exitUsage
	}
	if *markdown {
		if err := config.Markdown(stdout); err != nil {
			fmt.Fprintln(stderr, "poller config:", err)
			return exitFailure
		}
		return exitOK
	}
	return cmdConfig(stdout, stderr)
}

func cmdConfig(stdout, stderr io.Writer) int {
	_, problems := config.Load(config.ScopeRun)
	if err := config.Print(stdout); err != nil {
		fmt.Fprintln(stderr, "poller config:", err)
		return exitFailure
	}
	return reportProblems(stderr, problems)
}
