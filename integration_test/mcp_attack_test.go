//go:build linux

package integration

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// rawRecordedServer is an mcpServers list whose "notes" server records every
// byte the proxy sends it (in $ROOT/raw.log) before the notes server reads
// it: what the server was sent, whether or not it chose to run it.
var rawRecordedServer = `[{"name":"notes","command":"sh","args":["-c","tee -a \"$0\" | exec \"$1\"","$ROOT/raw.log","$MCPSERVER"],"env":[{"name":"MCPSERVER_LOG","value":"$ROOT/calls.log"}]}]`

// rawProxy starts the rewritten notes entry by hand and speaks raw MCP to
// it, after the initialize handshake.
func rawProxy(t *testing.T, d *decider) (send func(string), recv func() string, stop func() string) {
	t.Helper()
	d.noisy = true
	cmd := entryNamed(t, d.setup, "notes").command()
	in, lines, stderr := startRaw(t, cmd)
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	send = func(msg string) {
		t.Helper()
		if _, err := io.WriteString(in, msg+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	recv = func() string {
		t.Helper()
		if !lines.Scan() {
			t.Fatalf("the proxy closed its output\nstderr:\n%s", stderr.String())
		}
		return lines.Text()
	}
	stop = func() string {
		in.Close()
		exited := make(chan struct{})
		go func() { cmd.Wait(); close(exited) }()
		select {
		case <-exited:
		case <-time.After(waitTimeout):
			t.Fatal("the proxy did not exit when its input closed")
		}
		return stderr.String()
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	recv()
	send(`{"jsonrpc":"2.0","method":"notifications/initialized","params":{}}`)
	return send, recv, stop
}

// TestMCPCallsThatCannotBeHeldAreNotRelayed: a tools/call sent as a
// notification (no id) has no answer to wait for, so the proxy cannot hold
// it; nor is a method spelt almost as tools/call ("Tools/Call",
// "tools/call "). None of them may reach the server, which might run what
// it reads as a call: the server's input is checked byte for byte.
func TestMCPCallsThatCannotBeHeldAreNotRelayed(t *testing.T) {
	t.Parallel()
	d := startDecider(t, deciderOptions{
		rules:      "[[rule]]\nid = \"no-deletes\"\ndecision = \"deny\"\nmcp = \"notes/delete_notes\"\n",
		mcpServers: rawRecordedServer,
	})
	send, recv, stop := rawProxy(t, d)
	for _, msg := range []string{
		`{"jsonrpc":"2.0","method":"tools/call","params":{"name":"delete_notes","arguments":{}}}`,
		`{"jsonrpc":"2.0","method":"tools\/call","params":{"name":"delete_notes","arguments":{}}}`,
		`{"jsonrpc":"2.0","method":"Tools/Call","params":{"name":"delete_notes","arguments":{}}}`,
		`{"jsonrpc":"2.0","id":20,"method":"TOOLS/CALL","params":{"name":"delete_notes","arguments":{}}}`,
		`{"jsonrpc":"2.0","id":21,"method":"tools/call ","params":{"name":"delete_notes","arguments":{}}}`,
		`{"jsonrpc":"2.0","id":22,"method":"tools/call\u0000","params":{"name":"delete_notes","arguments":{}}}`,
	} {
		send(msg)
	}
	// The ones with an id are answered, by the proxy.
	for i := 0; i < 3; i++ {
		if got := recv(); !strings.Contains(got, `"isError":true`) {
			t.Errorf("a near-call was answered with %s", clip(got))
		}
	}
	send(`{"jsonrpc":"2.0","id":99,"method":"ping"}`)
	for got := recv(); !strings.Contains(got, `"id":99`); got = recv() {
		t.Errorf("unexpected answer %s", clip(got))
	}
	stderr := stop()
	raw, err := os.ReadFile(filepath.Join(d.root, "raw.log"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), "delete_notes") {
		t.Errorf("a call the broker never decided reached the server:\n%s", raw)
	}
	if !strings.Contains(string(raw), `"id":99`) {
		t.Errorf("the server's input was not recorded:\n%s", raw)
	}
	if !strings.Contains(stderr, "cannot hold; not relayed") {
		t.Errorf("no warning for the calls not relayed:\n%s", stderr)
	}
}

// TestMCPApprovalInACPCoversOnlyTheArgumentsShown: the agent asks in ACP
// for a harmless-looking MCP call whose arguments the broker cannot compare
// (a number no float64 holds), the human allows it, and the agent then
// makes the call with other arguments. The answer must not cover that call:
// the broker asks again, and on a rejection the call never reaches the
// server.
func TestMCPApprovalInACPCoversOnlyTheArgumentsShown(t *testing.T) {
	t.Parallel()
	d := startDecider(t, deciderOptions{mcpServers: notesServer})
	notes, _ := d.connectThroughAgent(t, entryNamed(t, d.setup, "notes"))
	listTools(t, notes)
	for i, c := range []struct{ name, shown, text string }{
		{"a number no float64 holds", `{"name":"n","text":"harmless","pad":1e999}`, "evil-1"},
		{"a repeated key", `{"name":"n","text":"harmless","text":"evil-2"}`, "evil-2"},
		{"integers one float64 apart", `{"name":"n","text":"evil-3","rev":9007199254740993}`, "evil-3"},
	} {
		d.step(t, c.name, func() {
			id := 30 + i
			d.asked(claudeMCPRequest(id, fmt.Sprintf("tc-%d", id), "notes", "write_note", c.shown),
				fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{"outcome":{"outcome":"selected","optionId":"allow"}}}`, id))
			args := map[string]any{"name": "n", "text": c.text}
			if strings.Contains(c.shown, "9007199254740993") {
				args["rev"] = int64(9007199254740992)
			}
			text, isErr := d.answerAfter(t, notes, "write_note", args, "reject_once")
			if !isErr {
				t.Errorf("the call was covered by the ACP answer: %q", text)
			}
			for _, call := range d.serverCalls(t) {
				if strings.Contains(call, c.text) {
					t.Errorf("the call reached the server: %s", call)
				}
			}
		})
	}
}
