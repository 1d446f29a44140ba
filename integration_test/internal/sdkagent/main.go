// Command sdkagent is an ACP agent built on the third-party
// github.com/coder/acp-go-sdk, for the integration tests. Its prompt turn is
// strictly sequential so that every run puts the same bytes on the wire: it
// streams updates, asks permission, reads and writes a file through the
// editor, runs a terminal, and ends the turn.
//
// With -record FILE it copies every byte it reads on stdin to FILE, so the
// test can compare what the agent received directly and through the broker.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"

	acp "github.com/coder/acp-go-sdk"
)

func main() {
	record := flag.String("record", "", "copy every byte read from stdin to this file")
	flag.Parse()

	var in io.Reader = os.Stdin
	if *record != "" {
		f, err := os.Create(*record)
		if err != nil {
			fmt.Fprintf(os.Stderr, "sdkagent: %v\n", err)
			os.Exit(1)
		}
		defer f.Close()
		in = io.TeeReader(os.Stdin, f)
	}

	ag := &agent{}
	conn := acp.NewAgentSideConnection(ag, os.Stdout, in)
	conn.SetLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	ag.conn = conn
	<-conn.Done()
}

const sessionID = acp.SessionId("sess_sdk_1")

type agent struct {
	conn *acp.AgentSideConnection
}

var (
	_ acp.Agent                  = (*agent)(nil)
	_ acp.ExtensionMethodHandler = (*agent)(nil)
)

func (a *agent) Initialize(ctx context.Context, p acp.InitializeRequest) (acp.InitializeResponse, error) {
	return acp.InitializeResponse{
		ProtocolVersion: acp.ProtocolVersionNumber,
		AgentInfo:       &acp.Implementation{Name: "sdkagent", Version: "0.0.1"},
		AuthMethods:     []acp.AuthMethod{},
	}, nil
}

func (a *agent) Authenticate(ctx context.Context, p acp.AuthenticateRequest) (acp.AuthenticateResponse, error) {
	return acp.AuthenticateResponse{}, nil
}

func (a *agent) NewSession(ctx context.Context, p acp.NewSessionRequest) (acp.NewSessionResponse, error) {
	return acp.NewSessionResponse{SessionId: sessionID}, nil
}

func (a *agent) Cancel(ctx context.Context, p acp.CancelNotification) error { return nil }

func (a *agent) CloseSession(ctx context.Context, p acp.CloseSessionRequest) (acp.CloseSessionResponse, error) {
	return acp.CloseSessionResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionClose)
}

func (a *agent) ListSessions(ctx context.Context, p acp.ListSessionsRequest) (acp.ListSessionsResponse, error) {
	return acp.ListSessionsResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionList)
}

func (a *agent) ResumeSession(ctx context.Context, p acp.ResumeSessionRequest) (acp.ResumeSessionResponse, error) {
	return acp.ResumeSessionResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionResume)
}

func (a *agent) SetSessionConfigOption(ctx context.Context, p acp.SetSessionConfigOptionRequest) (acp.SetSessionConfigOptionResponse, error) {
	return acp.SetSessionConfigOptionResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionSetConfigOption)
}

func (a *agent) SetSessionMode(ctx context.Context, p acp.SetSessionModeRequest) (acp.SetSessionModeResponse, error) {
	return acp.SetSessionModeResponse{}, nil
}

// HandleExtensionMethod answers _sdk/echo with its params; every other
// extension method is unknown.
func (a *agent) HandleExtensionMethod(ctx context.Context, method string, params json.RawMessage) (any, error) {
	if method == "_sdk/echo" {
		return params, nil
	}
	return nil, acp.NewMethodNotFound(method)
}

func (a *agent) Prompt(ctx context.Context, p acp.PromptRequest) (acp.PromptResponse, error) {
	text := ""
	if len(p.Prompt) > 0 && p.Prompt[0].Text != nil {
		text = p.Prompt[0].Text.Text
	}
	say := func(s string) error {
		return a.conn.SessionUpdate(ctx, acp.SessionNotification{SessionId: p.SessionId, Update: acp.UpdateAgentMessageText(s)})
	}
	if err := say("You said: " + text); err != nil {
		return acp.PromptResponse{}, err
	}
	path := "/project/README.md"
	if err := a.conn.SessionUpdate(ctx, acp.SessionNotification{
		SessionId: p.SessionId,
		Update: acp.StartToolCall("call_1", "Edit README.md",
			acp.WithStartKind(acp.ToolKindEdit),
			acp.WithStartStatus(acp.ToolCallStatusPending),
			acp.WithStartLocations([]acp.ToolCallLocation{{Path: path}}),
			acp.WithStartRawInput(map[string]any{"file_path": path, "z": 1, "a": []int{1, 2}}),
		),
	}); err != nil {
		return acp.PromptResponse{}, err
	}
	perm, err := a.conn.RequestPermission(ctx, acp.RequestPermissionRequest{
		SessionId: p.SessionId,
		ToolCall: acp.ToolCallUpdate{
			ToolCallId: "call_1",
			Title:      acp.Ptr("Edit README.md"),
			Kind:       acp.Ptr(acp.ToolKindEdit),
			RawInput:   map[string]any{"file_path": path, "z": 1, "a": []int{1, 2}}, // as announced
		},
		Options: []acp.PermissionOption{
			{OptionId: "allow-once", Name: "Allow", Kind: acp.PermissionOptionKindAllowOnce},
			{OptionId: "reject", Name: "Reject", Kind: acp.PermissionOptionKindRejectOnce},
		},
	})
	if err != nil {
		return acp.PromptResponse{}, err
	}
	if perm.Outcome.Selected == nil || perm.Outcome.Selected.OptionId != "allow-once" {
		if err := say("permission refused"); err != nil {
			return acp.PromptResponse{}, err
		}
		return acp.PromptResponse{StopReason: acp.StopReasonRefusal}, nil
	}
	read, err := a.conn.ReadTextFile(ctx, acp.ReadTextFileRequest{SessionId: p.SessionId, Path: path})
	if err != nil {
		return acp.PromptResponse{}, err
	}
	if _, err := a.conn.WriteTextFile(ctx, acp.WriteTextFileRequest{SessionId: p.SessionId, Path: path, Content: read.Content + "edited\n"}); err != nil {
		return acp.PromptResponse{}, err
	}
	// Asked first, as for the edit: a broker runs what the editor allowed.
	run, err := a.conn.RequestPermission(ctx, acp.RequestPermissionRequest{
		SessionId: p.SessionId,
		ToolCall: acp.ToolCallUpdate{
			ToolCallId: "call_2",
			Title:      acp.Ptr("make deploy"),
			Kind:       acp.Ptr(acp.ToolKindExecute),
			RawInput:   map[string]any{"command": "make deploy"},
		},
		Options: []acp.PermissionOption{
			{OptionId: "allow-once", Name: "Allow", Kind: acp.PermissionOptionKindAllowOnce},
			{OptionId: "reject", Name: "Reject", Kind: acp.PermissionOptionKindRejectOnce},
		},
	})
	if err != nil {
		return acp.PromptResponse{}, err
	}
	if run.Outcome.Selected == nil || run.Outcome.Selected.OptionId != "allow-once" {
		return acp.PromptResponse{StopReason: acp.StopReasonRefusal}, nil
	}
	term, err := a.conn.CreateTerminal(ctx, acp.CreateTerminalRequest{SessionId: p.SessionId, Command: "make", Args: []string{"deploy"}})
	if err != nil {
		return acp.PromptResponse{}, err
	}
	if _, err := a.conn.ReleaseTerminal(ctx, acp.ReleaseTerminalRequest{SessionId: p.SessionId, TerminalId: term.TerminalId}); err != nil {
		return acp.PromptResponse{}, err
	}
	if _, err := a.conn.CallExtension(ctx, "_sdk/unknown", map[string]any{"x": 1}); err == nil {
		return acp.PromptResponse{}, fmt.Errorf("_sdk/unknown: the editor answered, expected method not found")
	}
	if err := a.conn.NotifyExtension(ctx, "_sdk/notice", map[string]any{"note": "ignored by editors"}); err != nil {
		return acp.PromptResponse{}, err
	}
	if err := a.conn.SessionUpdate(ctx, acp.SessionNotification{
		SessionId: p.SessionId,
		Update: acp.UpdateToolCall("call_1",
			acp.WithUpdateStatus(acp.ToolCallStatusCompleted),
			acp.WithUpdateContent([]acp.ToolCallContent{acp.ToolContent(acp.TextBlock("wrote " + path))}),
		),
	}); err != nil {
		return acp.PromptResponse{}, err
	}
	if err := say(fmt.Sprintf("read %q, terminal %s", read.Content, term.TerminalId)); err != nil {
		return acp.PromptResponse{}, err
	}
	return acp.PromptResponse{StopReason: acp.StopReasonEndTurn}, nil
}
