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
	"unicode/utf8"

	acp "github.com/coder/acp-go-sdk"
)

// DefaultTimeout bounds a whole run of the demo. A run takes well under a
// second; the bound only keeps a broken broker from hanging it.
const DefaultTimeout = 30 * time.Second

// Options configure Run.
type Options struct {
	// Self is the acp-broker binary. Run starts it as the broker,
	//
	//	acp-broker --log-level warn --config TMP/demo-rules.toml \
	//	    --audit TMP/audit.jsonl --trace TMP/trace.jsonl -- Self example-agent
	//
	// always with argv[0] "acp-broker", whatever Self's file is called, in
	// the run's temporary directory TMP and with XDG_CONFIG_HOME and
	// XDG_STATE_HOME inside it, so that the user's own rules, trust and
	// audit log play no part.
	Self string

	// Direct connects the scripted editor to an example agent running in
	// this process, with no broker between them: the baseline. The editor
	// then answers every permission request itself. Self is unused.
	Direct bool

	// NoRules gives the broker a rule file with no rules, so that it
	// passes every permission request to the editor except the one that the
	// editor's earlier "always" answer covers: a run that, seen from the
	// editor, must be exactly the direct one but for that request.
	NoRules bool

	Stdout io.Writer // the header, one line per message, and the summary
	Stderr io.Writer // the broker's and the agent's own stderr

	// Width, if not zero, is the width of the terminal Stdout is: the
	// transcript's lines are fitted to it (see Transcript.FitTo). Zero
	// cuts nothing.
	Width int
	// Colour colours the decisions with ANSI escapes, for a terminal.
	Colour bool

	// Timeout bounds the whole run; zero means DefaultTimeout.
	Timeout time.Duration

	// Workspace, if set, is an existing empty directory to use as the
	// session's cwd; it is left in place afterwards. If empty, Run uses a
	// directory in its temporary directory, removed at the end.
	Workspace string
}

// Result is what a run saw.
type Result struct {
	// Entries is the transcript, every message in order: in a brokered
	// run, as the broker handled them (read from its --trace file), with
	// the requests it decided itself, its answers, and their reasons (from
	// its audit log) as notes; in a direct run, the same as Editor.
	Entries []Entry
	// Editor is every message the editor sent or received, byte for byte,
	// in that order, as its own pipes saw them.
	Editor []Entry
	// Audit is the broker's audit log, one record per line; nil in a
	// direct run.
	Audit []AuditRecord
	Stats Stats // what the transcript counted
}

// prompt is the one prompt the scripted editor sends.
const prompt = "Check the repository status, push main, run the tests, and note the status in NOTES.md."

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

	tmp, err := os.MkdirTemp("", "acp-broker-demo-")
	if err != nil {
		return nil, fmt.Errorf("creating the demo's temporary directory: %w", err)
	}
	defer os.RemoveAll(tmp)
	ws, err := prepareWorkspace(tmp, opts.Workspace)
	if err != nil {
		return nil, err
	}
	var files *brokerFiles // nil in a direct run
	if !opts.Direct {
		if files, err = newBrokerFiles(tmp, opts.NoRules); err != nil {
			return nil, err
		}
	}
	if _, err := io.WriteString(opts.Stdout, header(files, opts.Self, tmp, ws, opts.Workspace == "")); err != nil {
		return nil, err
	}

	// The agent's end of the conversation: the broker, or the agent itself.
	var (
		toAgent   io.WriteCloser
		fromAgent io.Reader
		finish    func(context.Context) error // after toAgent is closed and fromAgent has ended
	)
	if files == nil {
		toAgent, fromAgent, finish = startDirect(ctx, stderr)
	} else {
		toAgent, fromAgent, finish, err = startBroker(ctx, opts.Self, files, tmp, opts.Stderr, stderr)
		if err != nil {
			return nil, err
		}
	}

	rec := &recorder{}
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
	var runErr error
	switch err := ctx.Err(); {
	case errors.Is(err, context.DeadlineExceeded):
		runErr = fmt.Errorf("the demo did not finish within %v", timeout)
	case err != nil:
		runErr = err // interrupted
	case endErr != nil && convErr != nil:
		runErr = fmt.Errorf("%w (the editor saw: %v)", endErr, convErr)
	case endErr != nil:
		runErr = endErr
	case convErr != nil:
		runErr = convErr
	}

	res := &Result{Editor: rec.all()}
	res.Entries = res.Editor
	var readErr error
	if files != nil {
		res.Entries, readErr = readTrace(files.trace)
		if readErr == nil {
			res.Audit, readErr = readAudit(files.audit)
		}
		if readErr != nil {
			res.Entries = res.Editor // at least what the editor saw
		} else {
			annotate(res.Entries, res.Audit)
		}
	}
	// The transcript is written even when the run failed: it shows how far
	// the conversation got.
	style := style{width: opts.Width, colour: opts.Colour}
	res.Stats, err = transcribe(opts.Stdout, style, res.Entries, ws, "<workspace>", tmp, "<tmp>")
	switch {
	case runErr != nil:
		return nil, runErr
	case err != nil:
		return nil, fmt.Errorf("writing the transcript: %w", err)
	case readErr != nil:
		return nil, fmt.Errorf("reading the broker's trace and audit log: %w", readErr)
	}
	outcome, err := check(ws, res, expected(files != nil && !opts.NoRules, files != nil), files != nil)
	if err != nil {
		return res, err
	}
	if _, err := io.WriteString(opts.Stdout, summary(res, files != nil, outcome, style)); err != nil {
		return res, err
	}
	return res, nil
}

// style is how the output is shown: fitted to a terminal's width (0:
// nothing cut) and coloured, or not.
type style struct {
	width  int
	colour bool
}

// transcribe writes one transcript line per entry to w, in style st,
// showing each long string of abbrev (pairs of long and short) short, and
// returns what the transcript counted.
func transcribe(w io.Writer, st style, entries []Entry, abbrev ...string) (Stats, error) {
	t := NewTranscript(w)
	t.FitTo(st.width)
	t.Colour(st.colour)
	for i := 0; i+1 < len(abbrev); i += 2 {
		t.Abbreviate(abbrev[i], abbrev[i+1])
	}
	for _, e := range entries {
		if err := t.Add(e); err != nil {
			return t.Stats(), err
		}
	}
	return t.Stats(), nil
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

// startBroker starts the broker in dir with the demo's files and returns
// its stdin, its stdout, and a function that waits for it to exit.
func startBroker(ctx context.Context, self string, files *brokerFiles, dir string, stderr, lockedStderr io.Writer) (io.WriteCloser, io.Reader, func(context.Context) error, error) {
	if self == "" {
		return nil, nil, nil, errors.New("no acp-broker binary to run as the broker")
	}
	cmd := exec.CommandContext(ctx, self)
	cmd.Args = files.args(self) // argv[0] is "acp-broker", whatever self's file is called
	cmd.Env = files.env()
	// Not the user's directory: the broker would read a project rule file
	// there at start-up.
	cmd.Dir = dir
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

// prepareWorkspace returns the session's cwd, holding NOTES.md: dir if it
// is given, else a new directory in tmp.
func prepareWorkspace(tmp, dir string) (string, error) {
	if dir == "" {
		dir = filepath.Join(tmp, "workspace")
		if err := os.Mkdir(dir, 0o700); err != nil {
			return "", fmt.Errorf("creating the demo's workspace: %w", err)
		}
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, notesFile), []byte(initialNotes), 0o644); err != nil {
		return "", fmt.Errorf("creating the demo's workspace: %w", err)
	}
	return dir, nil
}

// header says who takes part and, in a brokered run, shows the rules.
func header(files *brokerFiles, self, tmp, ws string, temporary bool) string {
	short := strings.NewReplacer(tmp, "<tmp>").Replace
	var b strings.Builder
	b.WriteString("acp-broker demo: an editor and an agent talk ACP through a real broker\n\n")
	b.WriteString("  editor     this demo, playing an editor from a script\n")
	if files == nil {
		b.WriteString("  broker     none: the editor talks to the agent directly (the baseline)\n")
		b.WriteString("  agent      the built-in example agent, in this process, which follows a script\n")
		b.WriteString("             and runs no commands\n")
		fmt.Fprintf(&b, "  workspace  %s, shown as <workspace>", ws)
		if temporary {
			b.WriteString(", removed at the end")
		}
		b.WriteString("\n\n")
		b.WriteString("The editor allows git status and the writing of status.txt once, the first\nnpm test always and the second once, and rejects the force push and the edit.\n\n")
		b.WriteString(`Each line is one JSON-RPC message, as the editor sent or received it;
"↳" marks the answer to a request.

`)
		return b.String()
	}

	// The broker's command line, broken before --audit and before --.
	var lines []string
	var line []string
	for _, a := range files.args(self) {
		if (a == "--audit" || a == "--") && len(line) > 0 {
			lines = append(lines, strings.Join(line, " "))
			line = nil
		}
		line = append(line, short(a))
	}
	lines = append(lines, strings.Join(line, " "))
	fmt.Fprintf(&b, "  broker     %s\n", strings.Join(lines, " \\\n               "))
	fmt.Fprintf(&b, "             with XDG_CONFIG_HOME=%s and XDG_STATE_HOME=%s,\n", short(files.config), short(files.state))
	b.WriteString("             so that your own rules, trust and audit log play no part\n")
	b.WriteString("  agent      acp-broker example-agent, a built-in agent that follows a script\n")
	b.WriteString("             and runs no commands\n")
	fmt.Fprintf(&b, "  <tmp>      %s, removed at the end\n", tmp)
	fmt.Fprintf(&b, "  workspace  %s, shown as <workspace>\n\n", short(ws))

	fmt.Fprintf(&b, "The broker's rules, %s:\n\n", short(files.rules))
	for _, l := range strings.SplitAfter(files.text, "\n") {
		if strings.TrimSpace(l) != "" {
			b.WriteString("    ")
		}
		b.WriteString(l)
	}
	b.WriteString("\n")
	fmt.Fprintf(&b, `The editor starts the broker in place of the agent; the broker starts the
agent and relays every message both ways, byte for byte. A permission
request that a rule allows or denies, the broker answers itself; the other
%s go to the editor, which allows writing status.txt, rejects the edit of
NOTES.md and allows the first npm test "always": the broker remembers that
answer, answers the agent with its allow-once in place of the "always" (so
the agent remembers nothing of its own), and applies the answer to the
second npm test itself.

The agent then writes status.txt with fs/write_text_file. The broker
decides every write an agent asks the editor for, as it decides permission
requests; it lets this one through unasked because the editor has just
allowed the agent's request to edit that same file (one write for each
allowed request, within five minutes). A write nobody allowed, the broker
would ask about first.
`, NumberWord(len(EditorAsked())))
	b.WriteString(`
Each line is one JSON-RPC message, in the order the broker handled it (from
its --trace file); "↳" marks the answer to a request. "agent → broker" is
a request the broker decided itself, and "—" gives its decision and reason
(from its audit log).

`)
	return b.String()
}

// nextSteps ends a brokered run: what to do after the demo.
const nextSteps = `
Next steps
  1. acp-broker init
     writes a starter config of your own, with comments
  2. acp-broker rules explain --command 'git push --force'
     says what your rules decide for that command, and why
  3. wrap your agent: in your editor's settings, put acp-broker -- in front of
     the agent's command (README.md, "Wrap your agent")
`

// summary says who decided what, and in a brokered run ends with the next
// steps. On a terminal (st.width > 0) its long lines are wrapped to the
// width, and the answers coloured if st.colour.
func summary(res *Result, brokered bool, outcome string, st style) string {
	var b strings.Builder
	tr := NewTranscript(io.Discard) // only for its colours
	tr.Colour(st.colour)
	writeSummary(&b, res, brokered, outcome, tr)
	if brokered {
		b.WriteString(nextSteps)
	}
	if st.width == 0 {
		return b.String()
	}
	var fitted strings.Builder
	for _, line := range strings.SplitAfter(b.String(), "\n") {
		fitted.WriteString(fitLine(strings.TrimSuffix(line, "\n"), st.width))
		if strings.HasSuffix(line, "\n") {
			fitted.WriteString("\n")
		}
	}
	return fitted.String()
}

// fitLine wraps a summary line wider than width at spaces, the lines after
// its first indented two spaces deeper than it.
func fitLine(line string, width int) string {
	if utf8.RuneCountInString(stripANSI(line)) <= width {
		return line
	}
	text := strings.TrimLeft(line, " ")
	indent := line[:len(line)-len(text)]
	return indent + strings.Join(wrap(text, width-len(indent)-2), "\n"+indent+"  ")
}

func writeSummary(b *strings.Builder, res *Result, brokered bool, outcome string, tr *Transcript) {
	s := res.Stats
	b.WriteString("\nSummary\n")
	counts := make([]string, len(s.Messages))
	for i, c := range s.Messages {
		counts[i] = fmt.Sprintf("%d %s → %s", c.N, c.From, c.To)
	}
	verb := "passed between editor and agent"
	if brokered {
		verb = "reached the broker"
	}
	fmt.Fprintf(b, "  %d messages %s: %s.\n", s.Total(), verb, strings.Join(counts, ", "))

	audit := permissionAudit(res.Audit)
	var allowed, denied []string // what decided the requests the broker answered
	toEditor := 0
	fmt.Fprintf(b, "  %d permission requests:\n", len(s.Permissions))
	for _, p := range s.Permissions {
		answer := p.Outcome
		if p.OptionKind != "" {
			answer = p.OptionKind
		}
		fmt.Fprintf(b, "    %s (%s): %s, chosen by the %s", p.Title, p.Kind, tr.paint(toneOf(answer), answer), p.DecidedBy)
		if p.DecidedBy != Broker {
			toEditor++
			if r, ok := audit[p.ToolCallID]; ok && r.ChosenKind != "" && r.OptionKind != p.OptionKind {
				fmt.Fprintf(b, ", sent to the agent as %s", r.OptionKind)
			}
			if r, ok := audit[p.ToolCallID]; ok && r.Remembered != "" {
				fmt.Fprintf(b, " (remembered as %s)", r.Remembered)
			}
			b.WriteString("\n")
			continue
		}
		by := "?"
		if r, ok := audit[p.ToolCallID]; ok {
			by = decider(r)
		}
		fmt.Fprintf(b, " (%s)\n", by)
		if strings.HasPrefix(p.OptionKind, "allow") {
			allowed = append(allowed, by)
		} else {
			denied = append(denied, by)
		}
	}
	if brokered {
		fmt.Fprintf(b, "  The broker decided %d itself: allowed %d%s, denied %d%s. %d went to the editor.\n",
			len(allowed)+len(denied), len(allowed), parenthesized(allowed), len(denied), parenthesized(denied), toEditor)
		b.WriteString(auditSummary(res.Audit))
	}
	fmt.Fprintf(b, "  The turn ended with %s.\n", strings.Join(s.StopReasons, ", "))
	fmt.Fprintf(b, "  In the workspace, %s.\n", outcome)
	if brokered {
		b.WriteString("  The broker exited with status 0.\n")
	}
}

func parenthesized(items []string) string {
	if len(items) == 0 {
		return ""
	}
	return " (" + strings.Join(items, ", ") + ")"
}

// auditSummary counts the audit log's records: permission requests with
// who decided each, then the other methods.
func auditSummary(records []AuditRecord) string {
	var sources, methods []string
	others := make(map[string]int)
	for _, r := range records {
		if r.Method == "session/request_permission" {
			sources = append(sources, r.Source)
			continue
		}
		if others[r.Method] == 0 {
			methods = append(methods, r.Method)
		}
		others[r.Method]++
	}
	parts := []string{fmt.Sprintf("%d permission requests (decided by: %s)", len(sources), strings.Join(sources, ", "))}
	for _, m := range methods {
		parts = append(parts, fmt.Sprintf("%d %s", others[m], m))
	}
	return fmt.Sprintf("  The audit log has %d records: %s.\n", len(records), strings.Join(parts, " and "))
}

// recorder keeps the lines that cross the editor's pipes, as transcript
// entries, in the order they were written or read.
type recorder struct {
	mu      sync.Mutex
	entries []Entry
}

// tap returns a writer that records each complete line written to it as a
// message from one party to the other.
func (r *recorder) tap(from, to Party) io.Writer { return &tap{r: r, from: from, to: to} }

// all returns the entries recorded so far.
func (r *recorder) all() []Entry {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Entry(nil), r.entries...)
}

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
			t.r.entries = append(t.r.entries, Entry{From: t.from, To: t.to, Raw: bytes.Clone(line)})
		}
		t.partial = t.partial[i+1:]
	}
	t.partial = bytes.Clone(t.partial)
	return len(p), nil // never fail the conversation over its record
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
