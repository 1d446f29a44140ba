package session

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
)

// AgentNotFoundError reports an agent command that cannot be started.
type AgentNotFoundError struct {
	Name          string
	NotExecutable bool
	Err           error
}

func (e *AgentNotFoundError) Error() string {
	switch {
	case e.NotExecutable:
		return fmt.Sprintf("agent %q is not an executable file", e.Name)
	case strings.Contains(e.Name, "/"):
		return fmt.Sprintf("agent %q not found", e.Name)
	}
	return fmt.Sprintf("agent %q not found on PATH", e.Name)
}

func (e *AgentNotFoundError) Unwrap() error { return e.Err }

// LookAgent finds the agent's executable the way a shell would.
func LookAgent(name string) (string, error) {
	path, err := exec.LookPath(name)
	if err != nil {
		// A name with a slash is a path, not searched on PATH: if it exists,
		// it is the wrong kind of file (a directory, no execute bit).
		_, statErr := os.Stat(name)
		notExec := errors.Is(err, fs.ErrPermission) || (strings.Contains(name, "/") && statErr == nil)
		return "", &AgentNotFoundError{Name: name, NotExecutable: notExec, Err: err}
	}
	return path, nil
}

// agentProcess is the running agent: its pipes, its process group, and its
// exit status once it has one.
type agentProcess struct {
	pid    int      // the agent's pid, which is also its process group's
	stdin  *os.File // write end: the broker's messages to the agent
	stdout *os.File // read end: the agent's messages
	stderr *os.File // read end: the agent's log lines

	done     chan struct{} // closed when the agent has exited and been reaped
	exitCode int           // valid after done: the status to exit with
}

// StartedAgent is an agent process started by StartAgent before the broker is
// ready to relay it, so that the agent starts while the broker loads its
// configuration. Run relays it; a broker that fails before that calls Stop.
type StartedAgent struct {
	proc *agentProcess
	// signals are caught from the agent's start on (see Run); the ones that
	// arrive before the relay starts are passed on by it, or end with Stop.
	signals chan os.Signal
	// report is the keeper's report of the agent's pid, read by started.
	report *os.File

	once       sync.Once
	startedErr error
}

// StartAgent starts the agent as Run would (see startAgent) and returns as
// soon as its process exists, without waiting for a keeper to report that
// it started the agent. From then on the broker adopts the agent's orphans
// and catches the signals it passes on to the agent.
func StartAgent(path string, argv []string, keeper string) (*StartedAgent, error) {
	adoptOrphans()
	signals := make(chan os.Signal, 4)
	signal.Notify(signals, forwardedSignals...)
	proc, report, err := startAgent(path, argv, keeper)
	if err != nil {
		signal.Stop(signals)
		return nil, err
	}
	return &StartedAgent{proc: proc, signals: signals, report: report}, nil
}

// started waits until the agent runs: at once without a keeper, else once
// the keeper has reported the agent's pid, or why it could not start it.
func (a *StartedAgent) started() (*agentProcess, error) {
	a.once.Do(func() {
		if a.report == nil {
			return
		}
		pid, err := readKeeperReport(a.report)
		if err != nil {
			p := a.proc
			closeAll(p.stdin, p.stdout, p.stderr)
			<-p.done // the keeper exits when it could not start the agent
			a.startedErr = fmt.Errorf("starting agent: %w", err)
			return
		}
		a.proc.pid = pid
	})
	return a.proc, a.startedErr
}

// release stops catching signals for the agent.
func (a *StartedAgent) release() { signal.Stop(a.signals) }

// Stop ends an agent that will never be relayed, because the broker failed
// before it was ready: the agent was sent nothing and nothing it wrote is
// read. It gets EOF and SIGTERM at once, SIGKILL after killGrace, and so
// does whatever it left running.
func (a *StartedAgent) Stop(killGrace time.Duration, log *slog.Logger) {
	defer a.release()
	p, err := a.started()
	if err != nil {
		return // no agent ran
	}
	p.stop(0, killGrace)
	p.killLeftovers(killGrace, a.signals, log)
	closeAll(p.stdout, p.stderr)
}

// startAgent starts the agent in a process group of its own, so that signals
// and the final kill reach everything it started. The pipes are plain
// os.Pipe files rather than exec's StdoutPipe, whose read end Wait would
// close before the broker has read the agent's last messages.
//
// Given a keeper (see Keeper) on a platform that has one, the agent is
// started by the keeper, which ends the agent's whole tree if the broker is
// killed; otherwise the agent is the broker's child, and on Linux it is
// killed with the broker (but its descendants are not). With a keeper, the
// agent's pid is not known until the keeper reports it on the returned
// file (see StartedAgent.started); until then p.pid is the keeper's.
func startAgent(path string, argv []string, keeper string) (p *agentProcess, report *os.File, err error) {
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		closeAll(inR, inW)
		return nil, nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		closeAll(inR, inW, outR, outW)
		return nil, nil, err
	}
	p = &agentProcess{stdin: inW, stdout: outR, stderr: errR, done: make(chan struct{})}
	// What is run: the agent, or on Linux the keeper above it.
	run, runArgv := path, argv
	attr := &syscall.ProcAttr{
		Env:   os.Environ(),
		Files: []uintptr{inR.Fd(), outW.Fd(), errW.Fd()},
		Sys:   &syscall.SysProcAttr{Setpgid: true},
	}
	var reportW *os.File
	if keeper != "" && keeperSupported {
		if report, reportW, err = os.Pipe(); err != nil {
			closeAll(inR, inW, outR, outW, errR, errW)
			return nil, nil, err
		}
		run, runArgv = keeper, append([]string{keeper, KeeperCommand, path}, argv...)
		attr.Files = append(attr.Files, reportW.Fd())
		// The keeper catches it and ends the agent's tree.
		setParentDeathSignal(attr.Sys, syscall.SIGTERM)
	} else {
		setParentDeathSignal(attr.Sys, syscall.SIGKILL)
	}
	started := make(chan error)
	go p.startAndWait(run, runArgv, attr, started)
	err = <-started
	closeAll(inR, outW, errW, reportW)
	if err != nil {
		closeAll(inW, outR, errR, report)
		// Without a keeper this was the agent's own exec; with one it was
		// the keeper's, a failure of the broker's.
		var errno syscall.Errno
		if run == path && errors.As(err, &errno) {
			err = agentExecError(err.Error(), errno)
		}
		return nil, nil, fmt.Errorf("starting agent: %w", err)
	}
	return p, report, nil
}

// startAndWait starts the process and waits for it on one OS thread that
// nothing else runs on: Linux sends the parent-death signal when the thread
// that started a child ends, not when the process does, so the thread must
// live until the child is reaped. The process is started with
// syscall.ForkExec rather than os/exec, which before its first start
// probes the kernel with a throwaway child: one more process on the way to
// the agent.
func (p *agentProcess) startAndWait(path string, argv []string, attr *syscall.ProcAttr, started chan<- error) {
	runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
	child, err := syscall.ForkExec(path, argv, attr)
	if err != nil {
		started <- &os.PathError{Op: "fork/exec", Path: path, Err: err}
		return
	}
	p.pid = child // the keeper's, until it reports the agent's
	started <- nil
	p.exitCode = waitExit(child)
	close(p.done)
}

// waitExit reaps the child pid and returns its shell-style exit status:
// the exit code, or 128 plus the signal that ended it.
func waitExit(pid int) int {
	var ws syscall.WaitStatus
	for {
		_, err := syscall.Wait4(pid, &ws, 0, nil)
		if err != syscall.EINTR {
			break
		}
	}
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}

// signalGroup sends sig to the agent's whole process group.
func (p *agentProcess) signalGroup(sig syscall.Signal) {
	_ = syscall.Kill(-p.pid, sig) // ESRCH: the group is already gone
}

// closeStdin tells the agent there is no more input, as an editor closing its
// end of the pipe would.
func (p *agentProcess) closeStdin() {
	_ = p.stdin.Close() // safe while a write is in progress: that write fails
}

// forwardedSignals are the signals the broker passes on to the agent, in
// every phase: they ask the agent, not the broker, to stop.
var forwardedSignals = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP}

// supervise returns once the agent has exited. Until then it passes every
// signal on to the agent's process group, and when the editor goes away (or
// ctx ends) it stops the agent, still passing signals on meanwhile: a
// SIGTERM that arrives while the broker waits out the shutdown grace reaches
// the agent at once rather than after the grace.
func (p *agentProcess) supervise(ctx context.Context, signals <-chan os.Signal, editorGone <-chan struct{}, closeGrace, killGrace time.Duration, log *slog.Logger) {
	done := ctx.Done()
	for {
		select {
		case sig := <-signals:
			log.Info("passing signal to the agent", "signal", sig.String())
			p.signalGroup(sig.(syscall.Signal))
		case <-editorGone:
			log.Debug("editor closed the connection; stopping the agent")
			editorGone, done = nil, nil
			go p.stop(closeGrace, killGrace)
		case <-done:
			editorGone, done = nil, nil
			go p.stop(closeGrace, killGrace)
		case <-p.done:
			return
		}
	}
}

// stop ends the agent after the editor went away: it has closeGrace to exit
// on its own once its stdin is closed, then killGrace after SIGTERM, then it
// is killed.
func (p *agentProcess) stop(closeGrace, killGrace time.Duration) {
	p.closeStdin()
	if p.waitFor(closeGrace) {
		return
	}
	p.signalGroup(syscall.SIGTERM)
	if p.waitFor(killGrace) {
		return
	}
	p.signalGroup(syscall.SIGKILL)
	<-p.done
}

func (p *agentProcess) waitFor(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.done:
		return true
	case <-t.C:
		return false
	}
}

// killLeftovers ends whatever the agent left running once it has exited:
// the rest of its process group and, where the platform lets the broker
// adopt them, descendants that left the group. They get SIGTERM and then,
// after killGrace, SIGKILL. A signal the broker gets meanwhile is passed on
// to them too.
func (p *agentProcess) killLeftovers(killGrace time.Duration, signals <-chan os.Signal, log *slog.Logger) {
	pid := p.pid
	if syscall.Kill(-pid, 0) == nil || len(orphans()) > 0 {
		p.signalGroup(syscall.SIGTERM)
		signalOrphans(syscall.SIGTERM)
		deadline := time.Now().Add(killGrace)
		for time.Now().Before(deadline) && (syscall.Kill(-pid, 0) == nil || len(orphans()) > 0) {
			reapOrphans()
			select {
			case sig := <-signals:
				log.Info("passing signal to what the agent left running", "signal", sig.String())
				p.signalGroup(sig.(syscall.Signal))
				signalOrphans(sig.(syscall.Signal))
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	p.signalGroup(syscall.SIGKILL)
	killOrphans()
}

func closeAll(files ...*os.File) {
	for _, f := range files {
		_ = f.Close()
	}
}

// pumpLines copies the agent's stderr to w one whole line per Write, so the
// lines never interleave with the broker's own log records, which share w's
// lock. A line longer than the buffer is written in buffer-sized pieces.
func pumpLines(r io.Reader, w io.Writer) {
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := br.ReadSlice('\n')
		if len(line) > 0 {
			if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
				line = append(line, '\n') // the agent's last, unterminated line
			}
			_, _ = w.Write(line)
		}
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			return
		}
	}
}

// LockedWriter serialises writes to a shared destination such as stderr, so
// that whole lines from different sources never interleave.
type LockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

// NewLockedWriter returns a LockedWriter for w.
func NewLockedWriter(w io.Writer) *LockedWriter { return &LockedWriter{w: w} }

func (l *LockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
