//go:build linux

package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	acp "github.com/coder/acp-go-sdk"
)

// TestSDKPeers runs a whole session between two third-party peers: the
// editor is acp-go-sdk's ClientSideConnection in this process, the agent is
// internal/sdkagent built on its AgentSideConnection. Direct and through the
// broker, both sides must observe the same results and receive the same bytes.
func TestSDKPeers(t *testing.T) {
	t.Parallel()
	var got [2]sdkRun
	var ran [2]bool
	for i, broker := range []bool{false, true} {
		name := map[bool]string{false: "direct", true: "broker"}[broker]
		if !t.Run(name, func(t *testing.T) {
			got[i], ran[i] = runSDKSession(t, broker), true
		}) {
			return
		}
	}
	if !ran[0] || !ran[1] {
		return
	}
	compareTranscripts(t, got[0].wire, got[1].wire)
	if !reflect.DeepEqual(got[0].client, got[1].client) {
		t.Errorf("the editor observed different results\n direct: %#v\n broker: %#v", got[0].client, got[1].client)
	}
}

// sdkRun is what one run of the SDK session produced.
type sdkRun struct {
	wire   transcript // raw lines each side received
	client clientLog  // what the SDK editor observed, decoded
}

func runSDKSession(t *testing.T, broker bool) sdkRun {
	dir := t.TempDir()
	record := filepath.Join(dir, "agent-stdin")
	var cmd *exec.Cmd
	if broker {
		cmd = exec.Command(brokerBin, "--log-level", "warn", "--", "sdkagent", "-record", record)
	} else {
		cmd = exec.Command(sdkAgentBin, "-record", record)
	}
	s := newSession(t, options{broker: broker}, cmd)

	// The SDK reads the process's stdout through a tee that keeps the bytes.
	outR, outW := mustPipe(t)
	t.Cleanup(func() { outR.Close() })
	var wire lockedBuffer
	go func() {
		// s.out already drains the process's stdout line by line; replay it
		// into the SDK's reader while recording it.
		defer outW.Close()
		for {
			line, err := s.out.take(s.wait, nil)
			if err != nil {
				return
			}
			wire.Write(append(line, '\n'))
			if _, err := outW.Write(append(line, '\n')); err != nil {
				return
			}
		}
	}()

	client := &sdkClient{files: map[string]string{"/project/README.md": "# Project\n"}}
	conn := acp.NewClientSideConnection(client, s.stdin, outR)
	conn.SetLogger(slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()

	ini, err := conn.Initialize(ctx, acp.InitializeRequest{
		ProtocolVersion:    acp.ProtocolVersionNumber,
		ClientCapabilities: acp.ClientCapabilities{Fs: acp.FileSystemCapabilities{ReadTextFile: true, WriteTextFile: true}, Terminal: true},
		ClientInfo:         &acp.Implementation{Name: "integration-test", Version: "1"},
	})
	if err != nil {
		t.Fatalf("initialize: %v\n%s", err, s.debug())
	}
	client.record("initialize: agent %s, protocol %v", ini.AgentInfo.Name, ini.ProtocolVersion)

	sess, err := conn.NewSession(ctx, acp.NewSessionRequest{Cwd: "/project", McpServers: []acp.McpServer{}})
	if err != nil {
		t.Fatalf("session/new: %v\n%s", err, s.debug())
	}
	client.record("session/new: %s", sess.SessionId)

	resp, err := conn.Prompt(ctx, acp.PromptRequest{SessionId: sess.SessionId, Prompt: []acp.ContentBlock{acp.TextBlock("edit the readme")}})
	if err != nil {
		t.Fatalf("session/prompt: %v\n%s", err, s.debug())
	}
	client.record("session/prompt: %s", resp.StopReason)

	echo, err := conn.CallExtension(ctx, "_sdk/echo", map[string]any{"k": "v", "n": 1})
	if err != nil {
		t.Fatalf("_sdk/echo: %v", err)
	}
	client.record("_sdk/echo: %s", echo)
	_, err = conn.CallExtension(ctx, "_sdk/nope", nil)
	var reqErr *acp.RequestError
	if !errors.As(err, &reqErr) || reqErr.Code != -32601 {
		t.Fatalf("_sdk/nope: got %v, want a -32601 error", err)
	}
	client.record("_sdk/nope: %d", reqErr.Code)
	if err := conn.Cancel(ctx, acp.CancelNotification{SessionId: sess.SessionId}); err != nil {
		t.Fatalf("session/cancel: %v", err)
	}

	s.Finish()
	select {
	case <-conn.Done():
	case <-ctx.Done():
		t.Fatalf("the SDK editor did not see the end of the stream")
	}
	agentIn, err := os.ReadFile(record)
	if err != nil {
		t.Fatalf("agent record: %v", err)
	}

	if resp.StopReason != acp.StopReasonEndTurn {
		t.Errorf("stop reason %q, want end_turn", resp.StopReason)
	}
	if got := client.files["/project/README.md"]; got != "# Project\nedited\n" {
		t.Errorf("README after the turn: %q", got)
	}
	log := client.snapshot()
	if n := len(log.Updates); n != 4 {
		t.Errorf("editor saw %d session updates, want 4: %q", n, log.Updates)
	}
	if n := len(log.Updates); n > 0 {
		var last struct {
			Content struct{ Text string }
		}
		_ = json.Unmarshal([]byte(log.Updates[n-1]), &last)
		if want := `read "# Project\n", terminal term_1`; last.Content.Text != want {
			t.Errorf("last update says %q, want %q", last.Content.Text, want)
		}
	}
	if text := s.stderrText(); text != "" {
		t.Errorf("stderr of a clean SDK session is not empty:\n%s", text)
	}
	return sdkRun{
		wire:   transcript{Editor: splitLines(wire.Bytes()), Agent: splitLines(agentIn)},
		client: log,
	}
}

func splitLines(b []byte) []string {
	lines := strings.Split(string(b), "\n")
	if len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	} else if len(lines) > 0 {
		lines[len(lines)-1] += unterminated
	}
	return lines
}

type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Write(p)
}

func (b *lockedBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Clone(b.buf.Bytes())
}

// clientLog is what the SDK editor observed. Requests and notifications are
// kept apart: the SDK handles them on different goroutines, so only the order
// within each kind is deterministic.
type clientLog struct {
	Calls    []string // the editor's own calls and their results
	Requests []string // agent → editor requests, as handled
	Updates  []string // session/update notifications, as handled
}

// sdkClient is the editor's side: a fake file system, a fake terminal, and a
// permission prompt that picks the allow_once option by kind.
type sdkClient struct {
	mu    sync.Mutex
	files map[string]string
	log   clientLog
}

var _ acp.Client = (*sdkClient)(nil)

func (c *sdkClient) record(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.log.Calls = append(c.log.Calls, fmt.Sprintf(format, args...))
}

func (c *sdkClient) request(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.log.Requests = append(c.log.Requests, fmt.Sprintf(format, args...))
}

func (c *sdkClient) snapshot() clientLog {
	c.mu.Lock()
	defer c.mu.Unlock()
	return clientLog{
		Calls:    append([]string(nil), c.log.Calls...),
		Requests: append([]string(nil), c.log.Requests...),
		Updates:  append([]string(nil), c.log.Updates...),
	}
}

func (c *sdkClient) RequestPermission(ctx context.Context, p acp.RequestPermissionRequest) (acp.RequestPermissionResponse, error) {
	var kinds []string
	choice := acp.PermissionOptionId("")
	for _, o := range p.Options {
		kinds = append(kinds, string(o.Kind))
		if o.Kind == acp.PermissionOptionKindAllowOnce && choice == "" {
			choice = o.OptionId
		}
	}
	title := ""
	if p.ToolCall.Title != nil {
		title = *p.ToolCall.Title
	}
	c.request("request_permission %s %q %v → %s", p.ToolCall.ToolCallId, title, kinds, choice)
	return acp.RequestPermissionResponse{Outcome: acp.RequestPermissionOutcome{Selected: &acp.RequestPermissionOutcomeSelected{OptionId: choice}}}, nil
}

func (c *sdkClient) SessionUpdate(ctx context.Context, n acp.SessionNotification) error {
	b, err := json.Marshal(n.Update)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.log.Updates = append(c.log.Updates, string(b))
	return nil
}

func (c *sdkClient) ReadTextFile(ctx context.Context, p acp.ReadTextFileRequest) (acp.ReadTextFileResponse, error) {
	c.request("read_text_file %s", p.Path)
	c.mu.Lock()
	defer c.mu.Unlock()
	content, ok := c.files[p.Path]
	if !ok {
		return acp.ReadTextFileResponse{}, acp.NewInvalidParams(map[string]any{"path": p.Path})
	}
	return acp.ReadTextFileResponse{Content: content}, nil
}

func (c *sdkClient) WriteTextFile(ctx context.Context, p acp.WriteTextFileRequest) (acp.WriteTextFileResponse, error) {
	c.request("write_text_file %s %q", p.Path, p.Content)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.files[p.Path] = p.Content
	return acp.WriteTextFileResponse{}, nil
}

func (c *sdkClient) CreateTerminal(ctx context.Context, p acp.CreateTerminalRequest) (acp.CreateTerminalResponse, error) {
	c.request("terminal/create %s %v", p.Command, p.Args)
	return acp.CreateTerminalResponse{TerminalId: "term_1"}, nil
}

func (c *sdkClient) KillTerminal(ctx context.Context, p acp.KillTerminalRequest) (acp.KillTerminalResponse, error) {
	c.request("terminal/kill %s", p.TerminalId)
	return acp.KillTerminalResponse{}, nil
}

func (c *sdkClient) TerminalOutput(ctx context.Context, p acp.TerminalOutputRequest) (acp.TerminalOutputResponse, error) {
	c.request("terminal/output %s", p.TerminalId)
	return acp.TerminalOutputResponse{Output: "clean\n"}, nil
}

func (c *sdkClient) ReleaseTerminal(ctx context.Context, p acp.ReleaseTerminalRequest) (acp.ReleaseTerminalResponse, error) {
	c.request("terminal/release %s", p.TerminalId)
	return acp.ReleaseTerminalResponse{}, nil
}

func (c *sdkClient) WaitForTerminalExit(ctx context.Context, p acp.WaitForTerminalExitRequest) (acp.WaitForTerminalExitResponse, error) {
	c.request("terminal/wait_for_exit %s", p.TerminalId)
	return acp.WaitForTerminalExitResponse{}, nil
}
