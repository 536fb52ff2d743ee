// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Process is a child program whose output goes to a log file.
type Process struct {
	Name string
	Log  string

	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// StartProcess runs bin with args; env is added to the current environment.
// The child dies with us (SIGKILL on parent death) so a crashed test leaves nothing behind.
func StartProcess(name, logPath string, env []string, bin string, args ...string) (*Process, error) {
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		return nil, err
	}
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = log.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &Process{Name: name, Log: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		_ = log.Close()
		close(p.done)
	}()
	return p, nil
}

// PID is the child's process id.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Exited reports whether the child has ended, and how.
func (p *Process) Exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// Stop asks the child to end with SIGTERM and kills it after grace.
func (p *Process) Stop(grace time.Duration) error {
	if exited, _ := p.Exited(); exited {
		return nil
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		var exit *exec.ExitError
		if p.err != nil && !errors.As(p.err, &exit) {
			return p.err
		}
		return nil
	case <-time.After(grace):
		_ = p.Kill()
		return fmt.Errorf("%s did not stop within %s of SIGTERM; killed", p.Name, grace)
	}
}

// Kill ends the child at once, as a crash would, and waits for it.
func (p *Process) Kill() error {
	if exited, _ := p.Exited(); exited {
		return nil
	}
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	<-p.done
	return nil
}

// LogTail returns the last n bytes of the child's log, for error messages.
func (p *Process) LogTail(n int) string {
	b, err := os.ReadFile(p.Log)
	if err != nil {
		return ""
	}
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return strings.TrimSpace(string(b))
}
