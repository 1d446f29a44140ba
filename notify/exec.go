package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// Limits of what an Exec command may print.
const (
	// execOutputLimit bounds the answer read from the command's stdout;
	// more is no answer.
	execOutputLimit = 64 << 10
	// execStderrLimit bounds the stderr kept for the error message: the
	// last bytes are kept, where a failing script says why.
	execStderrLimit = 4 << 10
	// execIODelay is how long, once the command has exited and its process
	// group was killed, Ask waits for the rest of its output: only a
	// process that left the group can still hold the pipes open.
	execIODelay = 2 * time.Second
)

// Exec is a channel that runs a command for each prompt, such as
// notify-send with actions or a script.
//
// The command gets the Prompt as one JSON object and a newline on stdin,
// then end of input. It answers by printing one JSON object on stdout,
// either {"optionId":"..."} naming one of the prompt's options or
// {"decision":"allow_once|allow_always|reject_once|reject_always"}, and
// exiting 0. Other fields are ignored. Anything else is no answer: a
// non-zero exit or a signal, empty output, a second JSON value or trailing
// text, more than 64 KiB, an option the agent did not offer.
//
// A question (an agent's elicitation) reaches the command the same way: the
// Prompt then has message, mode and requestedSchema (form) or url and
// elicitationId (url), and no options. The command answers
// {"action":"accept","content":{...}}, {"action":"decline"} or
// {"action":"cancel"} (URL mode's accept, consent to open the URL, has no
// content). Content that does not satisfy requestedSchema is no answer, as
// is a question whose schema the broker cannot check: no command is run for
// that one.
//
// The command runs in a process group of its own. When it exits, or when
// Ask's ctx ends first, the whole group is killed with SIGKILL, so a
// notification helper it started in the background does not outlive the
// prompt.
type Exec struct {
	// ChannelName is the channel's name from the config.
	ChannelName string
	// Command is the argv to run; Command[0] is looked up in PATH.
	Command []string
	// Env is added to the broker's environment; nil for none. A variable
	// set here replaces the broker's.
	Env []string
}

// Name returns the channel's name.
func (e *Exec) Name() string { return e.ChannelName }

// Ask runs the command and returns the option it chose (or, for a
// question, its checked answer). When ctx ends
// first, the command's process group is killed and Ask returns ctx's error.
func (e *Exec) Ask(ctx context.Context, p Prompt) (Answer, error) {
	if len(e.Command) == 0 {
		return Answer{}, fmt.Errorf("exec channel %q: no command", e.ChannelName)
	}
	if err := ctx.Err(); err != nil {
		return Answer{}, err
	}
	if p.IsQuestion() {
		if _, err := p.CheckQuestion(); err != nil {
			return Answer{}, fmt.Errorf("exec channel %q: %w", e.ChannelName, err)
		}
	}
	input, err := json.Marshal(p)
	if err != nil {
		return Answer{}, fmt.Errorf("exec channel %q: encoding the prompt: %w", e.ChannelName, err)
	}
	input = append(input, '\n')

	res, err := runGroup(ctx, e.Command, append(promptEnv(p), e.Env...), input)
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil && res.ended {
			return Answer{}, ctxErr
		}
		return Answer{}, fmt.Errorf("exec channel %q: %w: %w", e.ChannelName, ErrNoAnswer, err)
	}
	fail := func(format string, args ...any) (Answer, error) {
		msg := fmt.Sprintf(format, args...)
		if tail := strings.TrimSpace(res.stderr); tail != "" {
			msg += fmt.Sprintf("; stderr: %q", tail)
		}
		return Answer{}, fmt.Errorf("exec channel %q: %w: %s", e.ChannelName, ErrNoAnswer, msg)
	}
	switch {
	case res.state.Success():
	case res.state.ExitCode() >= 0:
		return fail("%s exited with status %d", e.Command[0], res.state.ExitCode())
	default:
		return fail("%s ended: %v", e.Command[0], res.state)
	}
	if res.overflow {
		return fail("%s printed more than %d bytes", e.Command[0], execOutputLimit)
	}
	if p.IsQuestion() {
		action, content, err := parseQuestionReply(res.stdout)
		if err != nil {
			return fail("%s printed %v", e.Command[0], err)
		}
		ans, err := p.Reply(action, content)
		if err != nil {
			// Reply's error already says "no answer".
			return Answer{}, fmt.Errorf("exec channel %q: %w", e.ChannelName, err)
		}
		ans.Channel = e.ChannelName
		return ans, nil
	}
	optionID, decision, err := parseReply(res.stdout)
	if err != nil {
		return fail("%s printed %v", e.Command[0], err)
	}
	opt, err := p.Choose(optionID, decision)
	if err != nil {
		// Choose's error already says "no answer".
		return Answer{}, fmt.Errorf("exec channel %q: %w", e.ChannelName, err)
	}
	return Answer{OptionID: opt.ID, Channel: e.ChannelName}, nil
}

// promptEnv passes the prompt's gist in the environment too, so a script
// can show a notification without parsing JSON: ACP_BROKER_AGENT,
// ACP_BROKER_TITLE (one line), ACP_BROKER_KIND, ACP_BROKER_SUMMARY (the
// commands, paths, URLs or MCP tool, one a line, cut to 1,000 bytes),
// ACP_BROKER_OPTIONS (the offered option kinds, space-separated) and
// ACP_BROKER_REMEMBERS (what an allow_always answer makes the broker
// remember, empty when none is offered). For a question, ACP_BROKER_MODE
// is "form" or "url", ACP_BROKER_MESSAGE its message (one line, cut to
// 1,000 bytes) and ACP_BROKER_URL the whole URL (one line, never cut); the
// summary is the message and the URL.
func promptEnv(p Prompt) []string {
	kinds := make([]string, len(p.Options))
	remembers := ""
	for i, o := range p.Options {
		kinds[i] = o.Kind
		if o.Kind == "allow_always" && remembers == "" {
			remembers = OneLine(o.Remembers)
		}
	}
	// A NUL byte cannot stand in the environment; it would fail the start.
	clean := func(s string) string { return strings.ReplaceAll(s, "\x00", "") }
	return []string{
		"ACP_BROKER_AGENT=" + clean(p.Agent),
		"ACP_BROKER_TITLE=" + clean(Truncate(OneLine(p.Title), 1000)),
		"ACP_BROKER_KIND=" + clean(p.Kind),
		"ACP_BROKER_SUMMARY=" + clean(p.Summary(1000)),
		"ACP_BROKER_OPTIONS=" + clean(OneLine(strings.Join(kinds, " "))),
		"ACP_BROKER_REMEMBERS=" + clean(remembers),
		"ACP_BROKER_MODE=" + clean(OneLine(p.Mode)),
		"ACP_BROKER_MESSAGE=" + clean(Truncate(OneLine(p.Message), 1000)),
		"ACP_BROKER_URL=" + clean(OneLine(p.URL)),
	}
}

// groupResult is what a command run by runGroup left.
type groupResult struct {
	state    *os.ProcessState
	stdout   []byte
	overflow bool   // stdout went past execOutputLimit
	stderr   string // its last execStderrLimit bytes
	ended    bool   // ctx ended first: the group was killed
}

// runGroup runs argv in a process group of its own with input on stdin,
// and kills the whole group when the command exits or ctx ends, whichever
// comes first. It returns once the command has been reaped; an error means
// the command could not run, or ctx ended (res.ended).
func runGroup(ctx context.Context, argv, env []string, input []byte) (res groupResult, err error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}

	// The pipes are the process's own files, so Wait waits for the process
	// only, never for a descendant that still holds one of them.
	var closers []io.Closer
	defer func() {
		for _, c := range closers {
			c.Close()
		}
	}()
	pipe := func() (r, w *os.File, err error) {
		r, w, err = os.Pipe()
		if err == nil {
			closers = append(closers, r, w)
		}
		return r, w, err
	}
	stdinR, stdinW, err := pipe()
	if err != nil {
		return res, err
	}
	stdoutR, stdoutW, err := pipe()
	if err != nil {
		return res, err
	}
	stderrR, stderrW, err := pipe()
	if err != nil {
		return res, err
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdinR, stdoutW, stderrW
	if err := cmd.Start(); err != nil {
		return res, err
	}
	pgid := cmd.Process.Pid
	// The child has its copies; the parent's would keep the pipes open.
	stdinR.Close()
	stdoutW.Close()
	stderrW.Close()

	go func() {
		// A command that never reads its input fails this write once it
		// exits (EPIPE) or once stdinW is closed on return.
		_, _ = stdinW.Write(input)
		stdinW.Close()
	}()
	type output struct {
		data     []byte
		overflow bool
	}
	stdoutDone := make(chan output, 1)
	go func() {
		data, _ := io.ReadAll(io.LimitReader(stdoutR, execOutputLimit+1))
		overflow := len(data) > execOutputLimit
		// Go on reading, so that a chatty command is not blocked on a full
		// pipe; what it prints past the limit is no answer anyway.
		_, _ = io.Copy(io.Discard, stdoutR)
		stdoutDone <- output{data, overflow}
	}()
	stderrDone := make(chan string, 1)
	go func() {
		var tail tailBuffer
		_, _ = io.Copy(&tail, stderrR)
		stderrDone <- tail.String()
	}()

	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	select {
	case <-waited:
		// What it left behind in its group goes with it.
		killGroup(pgid)
	case <-ctx.Done():
		killGroup(pgid)
		<-waited
		res.ended = true
	}
	res.state = cmd.ProcessState

	// Every writer in the group is gone; only a process that left the group
	// can keep the pipes open, and it gets execIODelay.
	deadline := time.Now().Add(execIODelay)
	_ = stdoutR.SetReadDeadline(deadline)
	_ = stderrR.SetReadDeadline(deadline)
	out := <-stdoutDone
	res.stdout, res.overflow = out.data, out.overflow
	res.stderr = <-stderrDone
	if res.ended {
		return res, ctx.Err()
	}
	return res, nil
}

// killGroup sends SIGKILL to the process group pgid. ESRCH means it is
// already empty.
func killGroup(pgid int) {
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
}

// tailBuffer keeps the last execStderrLimit bytes written to it.
type tailBuffer struct {
	buf []byte
	cut bool
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	n := len(p)
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - execStderrLimit; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
		t.cut = true
	}
	return n, nil
}

func (t *tailBuffer) String() string {
	s := strings.ToValidUTF8(string(t.buf), "")
	if t.cut {
		s = "…" + s
	}
	return s
}

// parseReply reads a human's answer as a channel brought it back: exactly
// one JSON object, with an "optionId" or a "decision" string member (exact
// names, each at most once) and any other members, and nothing after it
// but white space.
func parseReply(data []byte) (optionID, decision string, err error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return "", "", errors.New("nothing")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return "", "", fmt.Errorf("no JSON object: %w", err)
	}
	if tok != json.Delim('{') {
		return "", "", errors.New("no JSON object")
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return "", "", fmt.Errorf("bad JSON: %w", err)
		}
		key, _ := tok.(string)
		var dst *string
		switch key {
		case "optionId":
			dst = &optionID
		case "decision":
			dst = &decision
		default:
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return "", "", fmt.Errorf("bad JSON: %w", err)
			}
			continue
		}
		if seen[key] {
			return "", "", fmt.Errorf("%q twice", key)
		}
		seen[key] = true
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return "", "", fmt.Errorf("bad JSON: %w", err)
		}
		if err := json.Unmarshal(raw, dst); err != nil {
			return "", "", fmt.Errorf("%q is not a string", key)
		}
	}
	if _, err := dec.Token(); err != nil { // the closing '}'
		return "", "", fmt.Errorf("bad JSON: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return "", "", errors.New("more than the one JSON object")
	}
	return optionID, decision, nil
}
