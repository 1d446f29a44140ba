package demo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	acp "github.com/coder/acp-go-sdk"
)

// DefaultTimeout bounds a whole run of the demo. A run takes well under a
// second; the bound only keeps a broken broker from hanging it.
const DefaultTimeout = 30 * time.Second

// Options configure Run.
type Options struct {
	// Self is the acp-broker binary. Run starts it as the broker,
	//
	//	acp-broker --log-level warn -- Self example-agent
	//
	// always with argv[0] "acp-broker", whatever Self's file is called.
	Self string

	// Direct connects the scripted editor to an example agent running in
	// this process, with no broker between them: the baseline that the
	// broker must not change. Self is then unused.
	Direct bool

	Stdout io.Writer // the header, one line per message, and the summary
	Stderr io.Writer // the broker's and the agent's own stderr

	// Timeout bounds the whole run; zero means DefaultTimeout.
	Timeout time.Duration

	// Workspace, if set, is an existing empty directory to use as the
	// session's cwd; it is left in place afterwards. If empty, Run uses a
	// new temporary directory and removes it at the end.
	Workspace string
}

// Result is what a run saw.
type Result struct {
	Entries []Entry // every message, in the order the editor sent or received it
	Stats   Stats
}

// prompt is the one prompt the scripted editor sends.
const prompt = "Check the repository status and note it in NOTES.md."

// initialNotes is NOTES.md in a new workspace.
const initialNotes = "# Notes\n\n- The build is green.\n"

// Self returns the path of the acp-broker binary that is running: os.Args[0]
// as a shell would find it, or else the executable the kernel reports.
func Self() (string, error) {
	if p, err := exec.LookPath(os.Args[0]); err == nil {
		return filepath.Abs(p)
	}
	p, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("finding the acp-broker executable: %w", err)
	}
	return p, nil
}

// Run plays the demo: it starts the broker (unless opts.Direct), lets the
// scripted editor hold one conversation with the example agent through it,
// and writes the transcript to opts.Stdout. It returns an error if any step
// fails or the conversation does not end as scripted.
func Run(ctx context.Context, opts Options) (*Result, error) {
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if opts.Stdout == nil {
		opts.Stdout = io.Discard
	}
	if opts.Stderr == nil {
		opts.Stderr = io.Discard
	}
	stderr := &lockedWriter{w: opts.Stderr}

	ws, cleanup, err := prepareWorkspace(opts.Workspace)
	if err != nil {
		return nil, err
	}
	defer cleanup()

	var brokerArgs []string
	if !opts.Direct {
		brokerArgs = []string{"acp-broker", "--log-level", "warn", "--", opts.Self, "example-agent"}
	}
	if _, err := io.WriteString(opts.Stdout, header(brokerArgs, ws, opts.Workspace == "")); err != nil {
		return nil, err
	}

	tr := NewTranscript(opts.Stdout)
	tr.Abbreviate(ws, "<workspace>")
	rec := &recorder{t: tr}

	// The agent's end of the conversation: the broker, or the agent itself.
	var (
		toAgent   io.WriteCloser
		fromAgent io.Reader
		finish    func(context.Context) error // after toAgent is closed and fromAgent has ended
	)
	if opts.Direct {
		toAgent, fromAgent, finish = startDirect(ctx, stderr)
	} else {
		toAgent, fromAgent, finish, err = startBroker(ctx, opts.Self, brokerArgs, opts.Stderr, stderr)
		if err != nil {
			return nil, err
		}
	}

	gate := make(chan struct{})
	editor := newScriptedEditor(ws)
	conn := acp.NewClientSideConnection(editor,
		io.MultiWriter(rec.tap(Editor, Agent), toAgent),
		io.TeeReader(&gatedReader{r: fromAgent, gate: gate}, rec.tap(Agent, Editor)))
	conn.SetLogger(quietLogger(stderr))
	close(gate)

	convErr := converse(ctx, conn, ws)

	// Hang up, as an editor does: close the agent's stdin and read its
	// stdout to the end.
	toAgent.Close()
	select {
	case <-conn.Done():
	case <-ctx.Done():
	}
	endErr := finish(ctx)
	switch err := ctx.Err(); {
	case errors.Is(err, context.DeadlineExceeded):
		return nil, fmt.Errorf("the demo did not finish within %v", timeout)
	case err != nil:
		return nil, err // interrupted
	}
	switch {
	case endErr != nil && convErr != nil:
		return nil, fmt.Errorf("%w (the editor saw: %v)", endErr, convErr)
	case endErr != nil:
		return nil, endErr
	case convErr != nil:
		return nil, convErr
	}

	rec.mu.Lock()
	defer rec.mu.Unlock()
	if rec.err != nil {
		return nil, fmt.Errorf("writing the transcript: %w", rec.err)
	}
	res := &Result{Entries: rec.entries, Stats: tr.Stats()}
	outcome, err := checkWorkspace(ws, res.Stats)
	if err != nil {
		return res, err
	}
	if _, err := io.WriteString(opts.Stdout, summary(res.Stats, !opts.Direct, outcome)); err != nil {
		return res, err
	}
	return res, nil
}

// converse is the editor's side of the conversation.
func converse(ctx context.Context, conn *acp.ClientSideConnection, ws string) error {
	if _, err := conn.Initialize(ctx, acp.InitializeRequest{
		ProtocolVersion: acp.ProtocolVersionNumber,
		ClientCapabilities: acp.ClientCapabilities{
			Fs: acp.FileSystemCapabilities{ReadTextFile: true, WriteTextFile: true},
		},
		ClientInfo: &acp.Implementation{Name: "acp-broker-demo-editor", Version: "1"},
	}); err != nil {
		return fmt.Errorf("initialize: %w", err)
	}
	sess, err := conn.NewSession(ctx, acp.NewSessionRequest{Cwd: ws, McpServers: []acp.McpServer{}})
	if err != nil {
		return fmt.Errorf("session/new: %w", err)
	}
	if _, err := conn.Prompt(ctx, acp.PromptRequest{
		SessionId: sess.SessionId,
		Prompt:    []acp.ContentBlock{acp.TextBlock(prompt)},
	}); err != nil {
		return fmt.Errorf("session/prompt: %w", err)
	}
	return nil
}

// startBroker starts the broker with argv args and returns its stdin, its
// stdout, and a function that waits for it to exit.
func startBroker(ctx context.Context, self string, args []string, stderr, lockedStderr io.Writer) (io.WriteCloser, io.Reader, func(context.Context) error, error) {
	if self == "" {
		return nil, nil, nil, errors.New("no acp-broker binary to run as the broker")
	}
	cmd := exec.CommandContext(ctx, self)
	cmd.Args = args // argv[0] is "acp-broker", whatever self's file is called
	if f, ok := stderr.(*os.File); ok {
		cmd.Stderr = f // shared as is: no copying goroutine to wait for
	} else {
		cmd.Stderr = lockedStderr
	}
	// When the run ends early, let the broker stop its agent as it does on
	// SIGTERM; it is killed only if it has not exited WaitDelay later.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 5 * time.Second
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, nil, nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, nil, nil, fmt.Errorf("starting the broker: %w", err)
	}
	finish := func(context.Context) error {
		err := cmd.Wait()
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			if code := exit.ExitCode(); code >= 0 {
				return fmt.Errorf("the broker exited with status %d", code)
			}
			return fmt.Errorf("the broker ended: %v", exit.ProcessState)
		}
		if err != nil {
			return fmt.Errorf("waiting for the broker: %w", err)
		}
		return nil
	}
	return stdin, stdout, finish, nil
}

// startDirect runs the example agent in this process, connected by pipes.
func startDirect(ctx context.Context, stderr io.Writer) (io.WriteCloser, io.Reader, func(context.Context) error) {
	agentStdin, editorWrites := io.Pipe()
	editorReads, agentStdout := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := RunAgent(ctx, agentStdin, agentStdout, stderr)
		agentStdout.Close()
		done <- err
	}()
	finish := func(ctx context.Context) error {
		select {
		case err := <-done:
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return editorWrites, editorReads, finish
}

// prepareWorkspace returns the session's cwd, holding NOTES.md, and a
// function that removes it if Run created it.
func prepareWorkspace(dir string) (string, func(), error) {
	cleanup := func() {}
	if dir == "" {
		d, err := os.MkdirTemp("", "acp-broker-demo-")
		if err != nil {
			return "", nil, fmt.Errorf("creating the demo's workspace: %w", err)
		}
		dir = d
		cleanup = func() { os.RemoveAll(d) }
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		cleanup()
		return "", nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, notesFile), []byte(initialNotes), 0o644); err != nil {
		cleanup()
		return "", nil, fmt.Errorf("creating the demo's workspace: %w", err)
	}
	return dir, cleanup, nil
}

// checkWorkspace verifies that the conversation went as scripted, and
// returns what it left in the workspace.
func checkWorkspace(ws string, s Stats) (string, error) {
	if len(s.StopReasons) != 1 || s.StopReasons[0] != string(acp.StopReasonEndTurn) {
		return "", fmt.Errorf("the turn ended with %v, not end_turn", s.StopReasons)
	}
	var kinds []string
	for _, p := range s.Permissions {
		kinds = append(kinds, p.OptionKind)
	}
	if strings.Join(kinds, " ") != "allow_once reject_once" {
		return "", fmt.Errorf("the permission requests were answered %v, not allow_once then reject_once", kinds)
	}
	if b, err := os.ReadFile(filepath.Join(ws, statusFile)); err != nil || string(b) != gitStatusOutput {
		return "", fmt.Errorf("the agent's %s is missing or wrong in the workspace", statusFile)
	}
	if b, err := os.ReadFile(filepath.Join(ws, notesFile)); err != nil || string(b) != initialNotes {
		return "", fmt.Errorf("%s changed although the edit was rejected", notesFile)
	}
	return fmt.Sprintf("%s was written; %s is unchanged because its edit was rejected", statusFile, notesFile), nil
}

func header(brokerArgs []string, ws string, temporary bool) string {
	var b strings.Builder
	b.WriteString("acp-broker demo: an editor and an agent talk ACP through a real broker\n\n")
	b.WriteString("  editor     this demo, playing an editor from a script\n")
	if brokerArgs != nil {
		fmt.Fprintf(&b, "  broker     %s\n", strings.Join(brokerArgs, " "))
		b.WriteString("  agent      acp-broker example-agent, a built-in agent that follows a script\n")
	} else {
		b.WriteString("  broker     none: the editor talks to the agent directly (the baseline)\n")
		b.WriteString("  agent      the built-in example agent, in this process, which follows a script\n")
	}
	b.WriteString("             and runs no commands\n")
	fmt.Fprintf(&b, "  workspace  %s, shown as <workspace>", ws)
	if temporary {
		b.WriteString(", removed at the end")
	}
	b.WriteString("\n\n")
	if brokerArgs != nil {
		b.WriteString(`The editor starts the broker in place of the agent; the broker starts the
agent and relays every message both ways, byte for byte. No rules are set,
so the broker forwards each permission request to the editor, which allows
the shell command once and rejects the file edit.

`)
	} else {
		b.WriteString("The editor allows the shell command once and rejects the file edit.\n\n")
	}
	b.WriteString(`Each line is one JSON-RPC message, as the editor sent or received it;
"↳" marks the answer to a request.

`)
	return b.String()
}

func summary(s Stats, broker bool, outcome string) string {
	var b strings.Builder
	b.WriteString("\nSummary\n")
	counts := make([]string, len(s.Messages))
	for i, c := range s.Messages {
		counts[i] = fmt.Sprintf("%d %s → %s", c.N, c.From, c.To)
	}
	verb := "passed between editor and agent"
	if broker {
		verb = "crossed the broker"
	}
	fmt.Fprintf(&b, "  %d messages %s: %s.\n", s.Total(), verb, strings.Join(counts, ", "))
	fmt.Fprintf(&b, "  %d permission requests:\n", len(s.Permissions))
	for _, p := range s.Permissions {
		answer := p.Outcome
		if p.OptionKind != "" {
			answer = p.OptionKind
		}
		fmt.Fprintf(&b, "    %s (%s): %s, chosen by the %s\n", p.Title, p.Kind, answer, p.DecidedBy)
	}
	fmt.Fprintf(&b, "  The turn ended with %s.\n", strings.Join(s.StopReasons, ", "))
	fmt.Fprintf(&b, "  In the workspace, %s.\n", outcome)
	if broker {
		b.WriteString("  The broker exited with status 0.\n")
	}
	return b.String()
}

// recorder turns the bytes that cross the editor's pipes into transcript
// entries, one per line, in the order they were written or read.
type recorder struct {
	mu      sync.Mutex
	t       *Transcript
	entries []Entry
	err     error // the first error writing the transcript
}

// tap returns a writer that records each complete line written to it as a
// message from one party to the other.
func (r *recorder) tap(from, to Party) io.Writer { return &tap{r: r, from: from, to: to} }

type tap struct {
	r        *recorder
	from, to Party
	partial  []byte
}

func (t *tap) Write(p []byte) (int, error) {
	t.r.mu.Lock()
	defer t.r.mu.Unlock()
	t.partial = append(t.partial, p...)
	for {
		i := bytes.IndexByte(t.partial, '\n')
		if i < 0 {
			break
		}
		if line := t.partial[:i]; len(bytes.TrimSpace(line)) > 0 {
			e := Entry{From: t.from, To: t.to, Raw: bytes.Clone(line)}
			t.r.entries = append(t.r.entries, e)
			if err := t.r.t.Add(e); err != nil && t.r.err == nil {
				t.r.err = err
			}
		}
		t.partial = t.partial[i+1:]
	}
	t.partial = bytes.Clone(t.partial)
	return len(p), nil // never fail the conversation over its transcript
}

// lockedWriter serialises writes from several goroutines.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
