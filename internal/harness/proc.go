package harness

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// ErrRunning is returned by Wait when the process is still running at the
// end of the timeout.
var ErrRunning = errors.New("still running")

// Spec is a process to start.
type Spec struct {
	// Name names the process in errors; the binary's base name if empty.
	Name string
	// Bin is the path of the binary, Args its arguments.
	Bin  string
	Args []string
	// Env is added to this process's environment; where a key repeats, the
	// last value wins.
	Env []string
	// Stdout and Stderr receive the output; nil discards it. Wait and Done
	// report the exit only once both writers have seen all of it.
	Stdout, Stderr io.Writer
}

// Proc is a running (or exited) child process.
type Proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error // what cmd.Wait returned; written before done is closed
}

// Start starts the process that s describes and reaps it when it exits.
//
// The environment also carries GORACE=atexit_sleep_ms=0 (before s.Env, so
// s.Env may override it): a binary built with the race detector otherwise
// sleeps a second before it exits, and exit timings matter to callers. A
// detected race still exits 66.
func Start(s Spec) (*Proc, error) {
	name := s.Name
	if name == "" {
		name = filepath.Base(s.Bin)
	}
	cmd := exec.Command(s.Bin, s.Args...)
	cmd.Env = append(append(os.Environ(), "GORACE=atexit_sleep_ms=0"), s.Env...)
	cmd.Stdout, cmd.Stderr = s.Stdout, s.Stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &Proc{name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// Name is the process's name from its Spec.
func (p *Proc) Name() string { return p.name }

// Pid is the process's id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Done is closed once the process has exited and been reaped.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has exited.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Signal sends sig to the process; it does nothing once the process has
// exited.
func (p *Proc) Signal(sig os.Signal) error {
	if p.Exited() {
		return nil
	}
	if err := p.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("signalling %s: %w", p.name, err)
	}
	return nil
}

// Wait waits up to timeout for the process to exit and returns its exit
// code (-1 if a signal ended it). The error is ErrRunning, wrapped, if the
// process is still running, or the reason it could not be waited for.
func (p *Proc) Wait(timeout time.Duration) (int, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
		return -1, fmt.Errorf("%s did not exit within %s: %w", p.name, timeout, ErrRunning)
	}
	var exit *exec.ExitError
	if p.err != nil && !errors.As(p.err, &exit) {
		return -1, fmt.Errorf("%s: %w", p.name, p.err)
	}
	return p.cmd.ProcessState.ExitCode(), nil
}

// Stop sends SIGTERM, waits up to timeout for the process to exit, then
// sends SIGKILL and waits for that. It returns the exit code (-1 if a signal
// ended the process).
func (p *Proc) Stop(timeout time.Duration) (int, error) {
	if err := p.Signal(syscall.SIGTERM); err != nil {
		return -1, err
	}
	code, err := p.Wait(timeout)
	if !errors.Is(err, ErrRunning) {
		return code, err
	}
	if err := p.Signal(syscall.SIGKILL); err != nil {
		return -1, err
	}
	<-p.done
	return -1, nil
}

// ExitCode is the exit code of an exited process; -1 while it runs or if a
// signal ended it.
func (p *Proc) ExitCode() int {
	if !p.Exited() {
		return -1
	}
	return p.cmd.ProcessState.ExitCode()
}

// Err is what waiting for the exited process returned (an *exec.ExitError
// for a non-zero exit); nil while it runs.
func (p *Proc) Err() error {
	if !p.Exited() {
		return nil
	}
	return p.err
}

var vmHWM = regexp.MustCompile(`VmHWM:\s*(\d+) kB`)

// PeakRSS is the high-water mark of the process's resident memory, in bytes:
// VmHWM from /proc/<pid>/status while it runs; once it has exited, the
// maximum resident set size the kernel reported when it was reaped (kept
// apart from VmHWM, it may differ by a few hundred KiB). Linux only.
func (p *Proc) PeakRSS() (int64, error) {
	if p.Exited() {
		ru, ok := p.cmd.ProcessState.SysUsage().(*syscall.Rusage)
		if !ok {
			return 0, fmt.Errorf("%s: no resource usage on this system", p.name)
		}
		return ru.Maxrss << 10, nil // kilobytes on Linux
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		return 0, fmt.Errorf("%s: reading its status: %w", p.name, err)
	}
	m := vmHWM.FindSubmatch(b)
	if m == nil {
		return 0, fmt.Errorf("%s: no VmHWM in its status (exiting?)", p.name)
	}
	kb, err := strconv.ParseInt(string(m[1]), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: VmHWM %q: %w", p.name, m[1], err)
	}
	return kb << 10, nil
}

// Buffer is an output buffer that a process may write while others read.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends b.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
