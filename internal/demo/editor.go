package demo

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	acp "github.com/coder/acp-go-sdk"
)

// scriptedEditor answers the agent's requests the way a person at an editor
// might: it allows shell commands once, except a force push, and the
// writing of status.txt, and rejects everything else; the first "npm test"
// it allows always. It chooses permission options by their kind, never by
// id, since ids differ from agent to agent. It serves file requests only
// inside its workspace.
type scriptedEditor struct {
	workspace string

	mu         sync.Mutex
	calls      map[acp.ToolCallId]announced // as announced in session/update
	saidAlways bool                         // it has answered an "npm test" with "always"
}

// announced is what a tool_call said about a tool call.
type announced struct {
	kind  acp.ToolKind
	title string
}

var _ acp.Client = (*scriptedEditor)(nil)

func newScriptedEditor(workspace string) *scriptedEditor {
	return &scriptedEditor{workspace: workspace, calls: make(map[acp.ToolCallId]announced)}
}

// preferredOptions is the editor's script: the option kinds it picks for a
// tool call, best first. The person it plays allows a shell command once,
// unless it force-pushes, and the writing of status.txt once, and rejects
// everything else; the first time it is
// asked to run "npm test", it allows it always. (An editor with no broker
// in front asks again, and is then allowed once.)
func preferredOptions(kind acp.ToolKind, title string, saidAlways bool) []acp.PermissionOptionKind {
	if kind == acp.ToolKindExecute && strings.HasPrefix(title, "npm test") && !saidAlways {
		return []acp.PermissionOptionKind{acp.PermissionOptionKindAllowAlways, acp.PermissionOptionKindAllowOnce}
	}
	if kind == acp.ToolKindExecute && !strings.Contains(title, "--force") || kind == acp.ToolKindEdit && title == "Write "+statusFile {
		return []acp.PermissionOptionKind{acp.PermissionOptionKindAllowOnce}
	}
	return []acp.PermissionOptionKind{acp.PermissionOptionKindRejectOnce, acp.PermissionOptionKindRejectAlways}
}

// chooseOption returns the id of the first option, in order of preference,
// whose kind is wanted.
func chooseOption(options []acp.PermissionOption, want []acp.PermissionOptionKind) (acp.PermissionOptionId, bool) {
	for _, k := range want {
		for _, o := range options {
			if o.Kind == k {
				return o.OptionId, true
			}
		}
	}
	return "", false
}

// readingTime is how long the scripted editor takes over a prompt, as a
// person would at least: the broker warns about an editor that answers
// sooner, since then nobody read the prompt.
const readingTime = 150 * time.Millisecond

func (e *scriptedEditor) RequestPermission(ctx context.Context, p acp.RequestPermissionRequest) (acp.RequestPermissionResponse, error) {
	select {
	case <-time.After(readingTime):
	case <-ctx.Done():
		return acp.RequestPermissionResponse{}, ctx.Err()
	}
	// The request may lack the kind and the title; the tool_call that
	// announced the same id is the reliable place for them.
	e.mu.Lock()
	defer e.mu.Unlock()
	call := e.calls[p.ToolCall.ToolCallId]
	if p.ToolCall.Kind != nil {
		call.kind = *p.ToolCall.Kind
	}
	if p.ToolCall.Title != nil {
		call.title = *p.ToolCall.Title
	}
	id, ok := chooseOption(p.Options, preferredOptions(call.kind, call.title, e.saidAlways))
	for _, o := range p.Options {
		if ok && o.OptionId == id && o.Kind == acp.PermissionOptionKindAllowAlways {
			e.saidAlways = true
		}
	}
	if !ok {
		// No option says what the script wants: decline to decide.
		return acp.RequestPermissionResponse{Outcome: acp.NewRequestPermissionOutcomeCancelled()}, nil
	}
	return acp.RequestPermissionResponse{Outcome: acp.NewRequestPermissionOutcomeSelected(id)}, nil
}

func (e *scriptedEditor) SessionUpdate(_ context.Context, n acp.SessionNotification) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	switch u := n.Update; {
	case u.ToolCall != nil:
		e.calls[u.ToolCall.ToolCallId] = announced{kind: u.ToolCall.Kind, title: u.ToolCall.Title}
	case u.ToolCallUpdate != nil:
		c := e.calls[u.ToolCallUpdate.ToolCallId]
		if u.ToolCallUpdate.Kind != nil {
			c.kind = *u.ToolCallUpdate.Kind
		}
		if u.ToolCallUpdate.Title != nil {
			c.title = *u.ToolCallUpdate.Title
		}
		e.calls[u.ToolCallUpdate.ToolCallId] = c
	}
	return nil
}

func (e *scriptedEditor) ReadTextFile(_ context.Context, p acp.ReadTextFileRequest) (acp.ReadTextFileResponse, error) {
	path, err := e.resolve(p.Path)
	if err != nil {
		return acp.ReadTextFileResponse{}, err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return acp.ReadTextFileResponse{}, acp.NewInternalError(map[string]any{"error": err.Error()})
	}
	content := string(b)
	if p.Line != nil || p.Limit != nil {
		lines := strings.SplitAfter(content, "\n")
		start := 0
		if p.Line != nil && *p.Line > 1 {
			start = min(*p.Line-1, len(lines))
		}
		end := len(lines)
		if p.Limit != nil && *p.Limit >= 0 {
			end = min(start+*p.Limit, end)
		}
		content = strings.Join(lines[start:end], "")
	}
	return acp.ReadTextFileResponse{Content: content}, nil
}

func (e *scriptedEditor) WriteTextFile(_ context.Context, p acp.WriteTextFileRequest) (acp.WriteTextFileResponse, error) {
	path, err := e.resolve(p.Path)
	if err != nil {
		return acp.WriteTextFileResponse{}, err
	}
	if err := os.WriteFile(path, []byte(p.Content), 0o644); err != nil {
		return acp.WriteTextFileResponse{}, acp.NewInternalError(map[string]any{"error": err.Error()})
	}
	return acp.WriteTextFileResponse{}, nil
}

// resolve returns path if it is an absolute path inside the workspace.
func (e *scriptedEditor) resolve(path string) (string, error) {
	if !filepath.IsAbs(path) {
		return "", acp.NewInvalidParams(map[string]any{"path": "must be absolute"})
	}
	path = filepath.Clean(path)
	rel, err := filepath.Rel(e.workspace, path)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", acp.NewInvalidParams(map[string]any{"path": fmt.Sprintf("%s is outside the workspace", path)})
	}
	return path, nil
}

// The editor advertises no terminal capability, so the agent must not use these.

func (e *scriptedEditor) CreateTerminal(context.Context, acp.CreateTerminalRequest) (acp.CreateTerminalResponse, error) {
	return acp.CreateTerminalResponse{}, acp.NewMethodNotFound(acp.ClientMethodTerminalCreate)
}

func (e *scriptedEditor) KillTerminal(context.Context, acp.KillTerminalRequest) (acp.KillTerminalResponse, error) {
	return acp.KillTerminalResponse{}, acp.NewMethodNotFound(acp.ClientMethodTerminalKill)
}

func (e *scriptedEditor) TerminalOutput(context.Context, acp.TerminalOutputRequest) (acp.TerminalOutputResponse, error) {
	return acp.TerminalOutputResponse{}, acp.NewMethodNotFound(acp.ClientMethodTerminalOutput)
}

func (e *scriptedEditor) ReleaseTerminal(context.Context, acp.ReleaseTerminalRequest) (acp.ReleaseTerminalResponse, error) {
	return acp.ReleaseTerminalResponse{}, acp.NewMethodNotFound(acp.ClientMethodTerminalRelease)
}

func (e *scriptedEditor) WaitForTerminalExit(context.Context, acp.WaitForTerminalExitRequest) (acp.WaitForTerminalExitResponse, error) {
	return acp.WaitForTerminalExitResponse{}, acp.NewMethodNotFound(acp.ClientMethodTerminalWaitForExit)
}
