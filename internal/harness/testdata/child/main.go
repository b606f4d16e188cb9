// Command child is the process the harness tests start: it exits with a
// given code, prints its environment, waits for signals or holds memory.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: child exit N | env KEY... | serve | ignore-term | alloc MIB")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "exit":
		code, _ := strconv.Atoi(os.Args[2])
		fmt.Print("to stdout\n")
		fmt.Fprint(os.Stderr, "to stderr\n")
		os.Exit(code)
	case "env":
		for _, k := range os.Args[2:] {
			fmt.Printf("%s=%s\n", k, os.Getenv(k))
		}
	case "serve":
		// Exits 0 on SIGTERM, 130 on SIGINT.
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
		fmt.Println("ready")
		if <-sig == syscall.SIGINT {
			fmt.Println("interrupted")
			os.Exit(130)
		}
		fmt.Println("terminated")
	case "ignore-term":
		signal.Ignore(syscall.SIGTERM)
		// A channel that hears a signal keeps the runtime from declaring a
		// deadlock; SIGUSR1 never comes.
		never := make(chan os.Signal, 1)
		signal.Notify(never, syscall.SIGUSR1)
		fmt.Println("ready")
		<-never
	case "alloc":
		mib, _ := strconv.Atoi(os.Args[2])
		b := make([]byte, mib<<20)
		for i := range b {
			b[i] = byte(i)
		}
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGTERM)
		fmt.Println("ready")
		<-sig
		fmt.Println(b[len(b)-1]) // keeps b alive until here
	default:
		fmt.Fprintf(os.Stderr, "unknown mode %q\n", os.Args[1])
		os.Exit(2)
	}
}
