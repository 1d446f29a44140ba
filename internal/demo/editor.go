package demo

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	acp "github.com/coder/acp-go-sdk"
)

// scriptedEditor answers the agent's requests the way a person at an editor
// might: it allows shell commands once and rejects everything else. It
// chooses permission options by their kind, never by id, since ids differ
// from agent to agent. It serves file requests only inside its workspace.
type scriptedEditor struct {
	workspace string

	mu    sync.Mutex
	kinds map[acp.ToolCallId]acp.ToolKind // as announced in session/update
}

var _ acp.Client = (*scriptedEditor)(nil)

func newScriptedEditor(workspace string) *scriptedEditor {
	return &scriptedEditor{workspace: workspace, kinds: make(map[acp.ToolCallId]acp.ToolKind)}
}

// preferredOptions is the editor's script: the option kinds it picks for a
// tool kind, best first.
func preferredOptions(kind acp.ToolKind) []acp.PermissionOptionKind {
	if kind == acp.ToolKindExecute {
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

func (e *scriptedEditor) RequestPermission(_ context.Context, p acp.RequestPermissionRequest) (acp.RequestPermissionResponse, error) {
	// The request may lack the kind; the tool_call that announced the same
	// id is the reliable place for it.
	e.mu.Lock()
	kind := e.kinds[p.ToolCall.ToolCallId]
	e.mu.Unlock()
	if p.ToolCall.Kind != nil {
		kind = *p.ToolCall.Kind
	}
	id, ok := chooseOption(p.Options, preferredOptions(kind))
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
	case u.ToolCall != nil && u.ToolCall.Kind != "":
		e.kinds[u.ToolCall.ToolCallId] = u.ToolCall.Kind
	case u.ToolCallUpdate != nil && u.ToolCallUpdate.Kind != nil:
		e.kinds[u.ToolCallUpdate.ToolCallId] = *u.ToolCallUpdate.Kind
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
