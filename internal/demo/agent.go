package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"

	acp "github.com/coder/acp-go-sdk"
)

// Names the example agent and the scripted editor agree on.
const (
	notesFile  = "NOTES.md"
	statusFile = "status.txt"

	// gitStatusOutput is what the example agent reports for its scripted
	// "git status": it runs no command.
	gitStatusOutput = "On branch main\nnothing to commit, working tree clean\n"

	// forcePush is the command the agent asks to run after git status.
	forcePush = "git push --force origin main"

	// The test commands the agent asks to run after the force push. The
	// editor answers the first with "always", and the broker answers the
	// second itself from what it remembered of that answer.
	npmTest         = "npm test -- --watch=false"
	npmTestCoverage = "npm test -- --coverage"
)

// RunAgent runs the example agent, speaking ACP on r and w, until r ends or
// ctx is done. The agent logs only warnings and errors, to logw.
//
// The agent supports initialize, session/new, session/prompt and
// session/cancel. Every prompt plays the same scripted turn: it streams a few
// message chunks, announces a shell command ("git status") and asks
// permission to run it, reads NOTES.md and, once allowed, writes status.txt
// in the session's cwd through the editor (if the editor advertised the fs
// capabilities), asks permission to force-push, asks permission to run the tests twice ("npm test"), asks
// permission to edit NOTES.md, and ends the turn. A
// refusal ends only the step it refuses. It never runs a command and never
// touches a file itself.
func RunAgent(ctx context.Context, r io.Reader, w io.Writer, logw io.Writer) error {
	a := &exampleAgent{sessions: make(map[acp.SessionId]*agentSession)}
	gate := make(chan struct{})
	conn := acp.NewAgentSideConnection(a, w, &gatedReader{r: r, gate: gate})
	conn.SetLogger(quietLogger(logw))
	a.conn = conn
	close(gate) // only now may messages arrive and reach a.conn
	select {
	case <-conn.Done():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// gatedReader holds back the first read until gate is closed, so that a
// connection is fully set up before its first message is handled.
type gatedReader struct {
	r    io.Reader
	gate <-chan struct{}
}

func (g *gatedReader) Read(p []byte) (int, error) {
	<-g.gate
	return g.r.Read(p)
}

// quietLogger logs the SDK's warnings and errors; its routine messages, such
// as "connection closed" at the end of every conversation, are dropped.
func quietLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type exampleAgent struct {
	conn *acp.AgentSideConnection // set before the first message is read

	mu       sync.Mutex
	fs       acp.FileSystemCapabilities
	sessions map[acp.SessionId]*agentSession
}

type agentSession struct {
	cwd    string
	cancel context.CancelFunc // of the running turn, or nil
}

var _ acp.Agent = (*exampleAgent)(nil)

func (a *exampleAgent) Initialize(_ context.Context, p acp.InitializeRequest) (acp.InitializeResponse, error) {
	a.mu.Lock()
	a.fs = p.ClientCapabilities.Fs
	a.mu.Unlock()
	return acp.InitializeResponse{
		ProtocolVersion: acp.ProtocolVersionNumber,
		AgentInfo:       &acp.Implementation{Name: "acp-broker-example-agent", Version: "1"},
		AuthMethods:     []acp.AuthMethod{},
	}, nil
}

func (a *exampleAgent) NewSession(_ context.Context, p acp.NewSessionRequest) (acp.NewSessionResponse, error) {
	if !filepath.IsAbs(p.Cwd) {
		return acp.NewSessionResponse{}, acp.NewInvalidParams(map[string]any{"cwd": "must be an absolute path"})
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	// Numbered, not random, so that every run of the demo shows the same ids.
	id := acp.SessionId(fmt.Sprintf("sess_%d", len(a.sessions)+1))
	a.sessions[id] = &agentSession{cwd: p.Cwd}
	return acp.NewSessionResponse{SessionId: id}, nil
}

func (a *exampleAgent) Cancel(_ context.Context, p acp.CancelNotification) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if s := a.sessions[p.SessionId]; s != nil && s.cancel != nil {
		s.cancel()
	}
	return nil
}

func (a *exampleAgent) Prompt(ctx context.Context, p acp.PromptRequest) (acp.PromptResponse, error) {
	a.mu.Lock()
	s := a.sessions[p.SessionId]
	if s == nil {
		a.mu.Unlock()
		return acp.PromptResponse{}, acp.NewInvalidParams(map[string]any{"sessionId": "unknown session"})
	}
	if s.cancel != nil {
		a.mu.Unlock()
		return acp.PromptResponse{}, acp.NewInvalidRequest(map[string]any{"sessionId": "a turn is already running"})
	}
	ctx, cancel := context.WithCancel(ctx)
	s.cancel = cancel
	fs, cwd := a.fs, s.cwd
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		s.cancel = nil
		a.mu.Unlock()
		cancel()
	}()

	t := &turn{conn: a.conn, sid: p.SessionId, cwd: cwd, fs: fs}
	err := t.play(ctx)
	if ctx.Err() != nil || errors.Is(err, errCancelled) {
		return acp.PromptResponse{StopReason: acp.StopReasonCancelled}, nil
	}
	if err != nil {
		return acp.PromptResponse{}, err
	}
	return acp.PromptResponse{StopReason: acp.StopReasonEndTurn}, nil
}

func (a *exampleAgent) Authenticate(context.Context, acp.AuthenticateRequest) (acp.AuthenticateResponse, error) {
	return acp.AuthenticateResponse{}, acp.NewMethodNotFound(acp.AgentMethodAuthenticate)
}

func (a *exampleAgent) CloseSession(context.Context, acp.CloseSessionRequest) (acp.CloseSessionResponse, error) {
	return acp.CloseSessionResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionClose)
}

func (a *exampleAgent) ListSessions(context.Context, acp.ListSessionsRequest) (acp.ListSessionsResponse, error) {
	return acp.ListSessionsResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionList)
}

func (a *exampleAgent) ResumeSession(context.Context, acp.ResumeSessionRequest) (acp.ResumeSessionResponse, error) {
	return acp.ResumeSessionResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionResume)
}

func (a *exampleAgent) SetSessionConfigOption(context.Context, acp.SetSessionConfigOptionRequest) (acp.SetSessionConfigOptionResponse, error) {
	return acp.SetSessionConfigOptionResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionSetConfigOption)
}

func (a *exampleAgent) SetSessionMode(context.Context, acp.SetSessionModeRequest) (acp.SetSessionModeResponse, error) {
	return acp.SetSessionModeResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionSetMode)
}

// errCancelled ends a turn whose permission request the editor answered
// with the cancelled outcome, as it must after sending session/cancel.
var errCancelled = errors.New("the editor cancelled the turn")

// turn is one scripted prompt turn. Every step waits for the previous one,
// so the conversation, and the demo's transcript, is the same on every run.
type turn struct {
	conn *acp.AgentSideConnection
	sid  acp.SessionId
	cwd  string
	fs   acp.FileSystemCapabilities
}

func (t *turn) play(ctx context.Context) error {
	if err := t.say(ctx, "I'll check the repository status, ", "push main, run the tests, then note the status in NOTES.md."); err != nil {
		return err
	}

	// A shell command: announced as a tool call, then asked about.
	gitStatus := command("call_1", "git status")
	allowed, err := t.announceAndAsk(ctx, gitStatus)
	if err != nil {
		return err
	}
	if !allowed {
		if err := t.finish(ctx, gitStatus.ToolCallId, acp.ToolCallStatusFailed, ""); err != nil {
			return err
		}
		return t.say(ctx, "Understood: I did not run git status.")
	}
	if err := t.finish(ctx, gitStatus.ToolCallId, acp.ToolCallStatusCompleted, gitStatusOutput); err != nil {
		return err
	}

	// File access goes through the editor, and so through the broker.
	notes := filepath.Join(t.cwd, notesFile)
	var oldNotes string
	if t.fs.ReadTextFile {
		r, err := t.conn.ReadTextFile(ctx, acp.ReadTextFileRequest{SessionId: t.sid, Path: notes})
		if err != nil {
			return fmt.Errorf("reading %s: %w", notes, err)
		}
		oldNotes = r.Content
	}
	if t.fs.WriteTextFile {
		// Asked first, as real agents do: a broker lets through the writes
		// that an answer allowed, and asks about any other itself.
		status := filepath.Join(t.cwd, statusFile)
		write, err := t.announceEdit(ctx, "call_2", "Write "+statusFile, status, acp.ToolDiffContent(status, gitStatusOutput))
		if err != nil {
			return err
		}
		allowed, err := t.ask(ctx, write)
		if err != nil {
			return err
		}
		end := acp.ToolCallStatusFailed
		if allowed {
			if _, err := t.conn.WriteTextFile(ctx, acp.WriteTextFileRequest{SessionId: t.sid, Path: status, Content: gitStatusOutput}); err != nil {
				return fmt.Errorf("writing %s: %w", status, err)
			}
			end = acp.ToolCallStatusCompleted
		}
		if err := t.finish(ctx, write.ToolCallId, end, ""); err != nil {
			return err
		}
	}
	if err := t.say(ctx, "The working tree is clean. ", "I'll force-push main so that origin matches it."); err != nil {
		return err
	}

	// A dangerous command. A refusal ends only this step. The agent cannot
	// tell who refused (the broker is invisible to it), so it says only
	// that the push was refused.
	push := command("call_3", forcePush)
	allowed, err = t.announceAndAsk(ctx, push)
	if err != nil {
		return err
	}
	end, output, said := acp.ToolCallStatusFailed, "", "The force push was refused, so I did not push. "
	if allowed {
		end, output, said = acp.ToolCallStatusCompleted, "Everything up-to-date\n", "Pushed. "
	}
	if err := t.finish(ctx, push.ToolCallId, end, output); err != nil {
		return err
	}
	if err := t.say(ctx, said, "Now the tests, then again with coverage."); err != nil {
		return err
	}

	// Two commands with the same program and subcommand: an "always" answer
	// to the first covers the second.
	passed := true
	for _, c := range []struct {
		call   acp.ToolCallUpdate
		output string
	}{
		{command("call_4", npmTest), "12 tests passed\n"},
		{command("call_5", npmTestCoverage), "12 tests passed; 87% of statements covered\n"},
	} {
		allowed, err := t.announceAndAsk(ctx, c.call)
		if err != nil {
			return err
		}
		end, output := acp.ToolCallStatusFailed, ""
		if allowed {
			end, output = acp.ToolCallStatusCompleted, c.output
		}
		passed = passed && allowed
		if err := t.finish(ctx, c.call.ToolCallId, end, output); err != nil {
			return err
		}
	}
	said = "I did not run all the tests. "
	if passed {
		said = "The tests pass. "
	}
	if err := t.say(ctx, said, "I'd like to add the status to NOTES.md."); err != nil {
		return err
	}

	// An edit: announced with its diff, then asked about.
	newNotes := strings.TrimRight(oldNotes, "\n") + "\n- The working tree is clean.\n"
	edit, err := t.announceEdit(ctx, "call_6", "Edit "+notesFile, notes, acp.ToolDiffContent(notes, newNotes, oldNotes))
	if err != nil {
		return err
	}
	allowed, err = t.ask(ctx, edit)
	if err != nil {
		return err
	}
	if !allowed || !t.fs.WriteTextFile {
		if err := t.finish(ctx, edit.ToolCallId, acp.ToolCallStatusFailed, ""); err != nil {
			return err
		}
		return t.say(ctx, "Understood: I left NOTES.md unchanged.")
	}
	if _, err := t.conn.WriteTextFile(ctx, acp.WriteTextFileRequest{SessionId: t.sid, Path: notes, Content: newNotes}); err != nil {
		return fmt.Errorf("writing %s: %w", notes, err)
	}
	if err := t.finish(ctx, edit.ToolCallId, acp.ToolCallStatusCompleted, ""); err != nil {
		return err
	}
	return t.say(ctx, "Done: NOTES.md is updated.")
}

// command returns the tool call of a shell command.
func command(id acp.ToolCallId, cmd string) acp.ToolCallUpdate {
	return acp.ToolCallUpdate{
		ToolCallId: id,
		Title:      acp.Ptr(cmd),
		Kind:       acp.Ptr(acp.ToolKindExecute),
		Status:     acp.Ptr(acp.ToolCallStatusPending),
		RawInput:   map[string]any{"command": cmd},
	}
}

// announceAndAsk announces a shell command's tool call in a session/update,
// as real agents do, then asks permission to run it.
func (t *turn) announceAndAsk(ctx context.Context, call acp.ToolCallUpdate) (bool, error) {
	if err := t.update(ctx, acp.StartToolCall(call.ToolCallId, *call.Title,
		acp.WithStartKind(*call.Kind),
		acp.WithStartStatus(*call.Status),
		acp.WithStartRawInput(call.RawInput))); err != nil {
		return false, err
	}
	return t.ask(ctx, call)
}

// finish reports the end of a tool call, with its output if any.
func (t *turn) finish(ctx context.Context, id acp.ToolCallId, status acp.ToolCallStatus, output string) error {
	opts := []acp.ToolCallUpdateOpt{acp.WithUpdateStatus(status)}
	if output != "" {
		opts = append(opts, acp.WithUpdateContent([]acp.ToolCallContent{acp.ToolContent(acp.TextBlock(output))}))
	}
	return t.update(ctx, acp.UpdateToolCall(id, opts...))
}

// say streams text to the editor, one agent_message_chunk per piece.
func (t *turn) say(ctx context.Context, pieces ...string) error {
	for _, p := range pieces {
		if err := t.update(ctx, acp.UpdateAgentMessageText(p)); err != nil {
			return err
		}
	}
	return nil
}

// announceEdit shows an edit of path, with its diff, in the editor's thread,
// and returns the tool call to ask about.
func (t *turn) announceEdit(ctx context.Context, id, title, path string, diff acp.ToolCallContent) (acp.ToolCallUpdate, error) {
	call := acp.ToolCallUpdate{
		ToolCallId: acp.ToolCallId(id),
		Title:      acp.Ptr(title),
		Kind:       acp.Ptr(acp.ToolKindEdit),
		Status:     acp.Ptr(acp.ToolCallStatusPending),
		Locations:  []acp.ToolCallLocation{{Path: path}},
		RawInput:   map[string]any{"file_path": path},
	}
	err := t.update(ctx, acp.StartToolCall(call.ToolCallId, title,
		acp.WithStartKind(*call.Kind),
		acp.WithStartStatus(*call.Status),
		acp.WithStartLocations(call.Locations),
		acp.WithStartContent([]acp.ToolCallContent{diff}),
		acp.WithStartRawInput(call.RawInput)))
	return call, err
}

func (t *turn) update(ctx context.Context, u acp.SessionUpdate) error {
	return t.conn.SessionUpdate(ctx, acp.SessionNotification{SessionId: t.sid, Update: u})
}

// ask sends session/request_permission for a tool call and reports whether
// the answer allows it. Like real agents, it decides by the kind of the
// selected option; the ids are its own.
func (t *turn) ask(ctx context.Context, call acp.ToolCallUpdate) (bool, error) {
	options := []acp.PermissionOption{
		{OptionId: "allow-once", Name: "Allow", Kind: acp.PermissionOptionKindAllowOnce},
		{OptionId: "allow-always", Name: "Always allow", Kind: acp.PermissionOptionKindAllowAlways},
		{OptionId: "reject", Name: "Reject", Kind: acp.PermissionOptionKindRejectOnce},
	}
	r, err := t.conn.RequestPermission(ctx, acp.RequestPermissionRequest{SessionId: t.sid, ToolCall: call, Options: options})
	if err != nil {
		return false, fmt.Errorf("asking permission for %s: %w", call.ToolCallId, err)
	}
	if r.Outcome.Selected == nil {
		return false, errCancelled
	}
	for _, o := range options {
		if o.OptionId == r.Outcome.Selected.OptionId {
			return o.Kind == acp.PermissionOptionKindAllowOnce || o.Kind == acp.PermissionOptionKindAllowAlways, nil
		}
	}
	return false, fmt.Errorf("the editor selected %q, which is not one of the options", r.Outcome.Selected.OptionId)
}
