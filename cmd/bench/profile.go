package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// perfRecord starts `perf record -g` on the processes pids, writing
// dir/name.perf.data, and returns a function that ends the recording and
// waits for perf to write it. Read it with `perf report -i`.
func perfRecord(dir, name string, pids ...int) (stop func() error, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	ps := make([]string, len(pids))
	for i, p := range pids {
		ps[i] = strconv.Itoa(p)
	}
	data := filepath.Join(dir, name+".perf.data")
	cmd := exec.Command("perf", "record", "-F", "499", "-g", "-p", strings.Join(ps, ","), "-o", data)
	out, err := os.Create(filepath.Join(dir, name+".perf.log"))
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		_ = out.Close()
		return nil, fmt.Errorf("starting perf: %w", err)
	}
	return func() error {
		defer out.Close()
		_ = cmd.Process.Signal(syscall.SIGINT)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				// perf ends with the SIGINT that stops it.
				if _, statErr := os.Stat(data); statErr == nil {
					return nil
				}
				return fmt.Errorf("perf record: %w (see %s)", err, out.Name())
			}
			return nil
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			return fmt.Errorf("perf record did not stop (see %s)", out.Name())
		}
	}, nil
}
