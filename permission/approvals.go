package permission

import (
	"bytes"
	"encoding/json"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/acp-broker/acp-broker/jsonrpc"
	"github.com/acp-broker/acp-broker/rules"
)

// approvalTTL is how long an answered permission request covers the action
// that follows it.
const approvalTTL = 5 * time.Minute

// maxApprovals bounds the answers kept; the oldest go first.
const maxApprovals = 1024

// approvals are the answers to the agent's own session/request_permission
// requests, each covering one later action of the same session that the
// agent then performs without asking again: an MCP tools/call of the same
// tool (with the same arguments when the request showed them), a
// terminal/create of the same command in the same directory, or an
// fs/write_text_file of a path the request edits. Allowed, the action goes
// on; rejected, it is refused without asking again. Each answer covers one
// action, within approvalTTL.
type approvals struct {
	mu   sync.Mutex
	list []approval
}

type approval struct {
	session string
	what    string          // see mcpApproval, commandApproval, writeApproval
	args    json.RawMessage // MCP arguments, canonical; nil when the request did not show them
	allowed bool
	at      time.Time
}

func mcpApproval(tool rules.MCPTool) string { return "mcp " + tool.String() }

func writeApproval(path string) string { return "write " + path }

// linkedAs is a path as an approval names it: with where its symbolic links
// lead now, so that an answer given for a file or directory does not cover
// the same name once a link leads elsewhere (src/x.go replaced by a link to
// ~/.profile after the answer).
func linkedAs(abs, resolved string) string {
	if resolved == "" || resolved == abs {
		return abs
	}
	return abs + " -> " + resolved
}

// commandApproval is what a command is compared by: its words and the
// directory it runs in. A command line made only of plain words (`go test
// ./...`) counts as the argv it splits into, so a request showing it as a
// string covers a terminal given as command and args; any other line
// counts only as that exact line.
func commandApproval(cmd rules.GivenCommand, dir string) (string, bool) {
	words := cmd.Argv
	if words == nil {
		var ok bool
		if words, ok = plainWords(cmd.Line); !ok {
			if strings.TrimSpace(cmd.Line) == "" {
				return "", false
			}
			line, _ := json.Marshal(cmd.Line)
			return "line " + string(line) + " in " + dir, true
		}
	}
	if len(words) == 0 {
		return "", false
	}
	argv, _ := json.Marshal(words)
	return "argv " + string(argv) + " in " + dir, true
}

// plainWords splits a command line that a shell would split the same way,
// with nothing to expand, quote or redirect: words of letters, digits and
// _ . / : @ % + , - and = (not in the program's name, where it would be an
// assignment), separated by spaces and tabs.
func plainWords(line string) ([]string, bool) {
	words := strings.FieldsFunc(line, func(r rune) bool { return r == ' ' || r == '\t' })
	for i, w := range words {
		for _, r := range w {
			plain := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("_./:@%+,-", r) || (r == '=' && i > 0)
			if !plain {
				return nil, false
			}
		}
	}
	return words, len(words) > 0
}

// editKinds are the kinds that show a request as a change to its paths.
var editKinds = map[string]bool{"edit": true, "delete": true, "move": true}

// noteRequest records the answer to a permission request for what it
// covers: its MCP call, and, if the broker read the request exactly, its
// command or else the paths it edits.
func (a *approvals) noteRequest(sessionID string, req *rules.Request, mcpArgs json.RawMessage, allowed bool) {
	if req.MCP != nil {
		a.note(sessionID, mcpApproval(*req.MCP), mcpArgs, allowed)
	}
	if sessionID == "" || len(req.NotUnderstood) > 0 || len(req.Conflicts) > 0 {
		return
	}
	if allowed && (hiddenSubject(req) != "" || (req.Script == nil && !editKinds[req.Kind])) {
		// The human allowed what the editor showed (an MCP call, an
		// edit, a todo list), not a command in its input, nor a write
		// by the agent of a path a request that is no edit names.
		return
	}
	if req.Script != nil {
		if what, ok := commandApproval(req.Command, linkedAs(req.Dir, req.ResolvedDir())); ok {
			a.note(sessionID, what, nil, allowed)
		}
		return
	}
	for _, p := range req.Paths {
		if p.Write && !p.WorkDir {
			a.note(sessionID, writeApproval(linkedAs(p.Abs, p.Resolved)), nil, allowed)
		}
	}
}

func (a *approvals) note(sessionID, what string, args json.RawMessage, allowed bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.expire()
	if len(a.list) >= maxApprovals {
		a.list = a.list[1:]
	}
	a.list = append(a.list, approval{session: sessionID, what: what, args: canonicalJSON(args), allowed: allowed, at: time.Now()})
}

// take consumes the oldest answer that covers an action, and says whether
// it allowed it. Nothing is looked up without its session: an MCP call
// whose session the broker does not know yet (its set-up not answered)
// cannot follow an ACP request of that session, and an answer given in
// another session covers nothing of this one.
func (a *approvals) take(sessionID, what string, args json.RawMessage) (found, allowed bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.expire()
	want := canonicalJSON(args)
	if want == nil {
		want = json.RawMessage("{}") // a call without arguments has none
	}
	for i, ap := range a.list {
		if ap.what != what || sessionID == "" || ap.session != sessionID {
			continue
		}
		if ap.args != nil && (!bytes.Equal(ap.args, want) || bytes.Equal(want, unreadableArgs)) {
			continue
		}
		a.list = append(a.list[:i], a.list[i+1:]...)
		return true, ap.allowed
	}
	return false, false
}

func (a *approvals) expire() {
	cut := 0
	for cut < len(a.list) && time.Since(a.list[cut].at) > approvalTTL {
		cut++
	}
	a.list = a.list[cut:]
}

// canonicalJSON re-encodes a JSON value with sorted keys and every number
// as written, so equal values compare equal; nil for nothing. Numbers are
// not compared as float64: 9007199254740993 and 9007199254740992 are one
// float64 but two ids to a server that reads integers, and 1e999 is none.
// A value that cannot be read exactly (a repeated key, invalid JSON) is
// unreadableArgs, which covers and is covered by nothing.
func canonicalJSON(raw json.RawMessage) json.RawMessage {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil
	}
	if jsonrpc.Strict(raw) != nil {
		return unreadableArgs
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return unreadableArgs
	}
	if m, ok := v.(map[string]any); ok && len(m) == 0 {
		return json.RawMessage("{}")
	}
	out, err := json.Marshal(v)
	if err != nil || bytes.ContainsRune(out, utf8.RuneError) {
		// U+FFFD is also what invalid UTF-8 and lone surrogates ("\ud800")
		// decode to: two different strings would compare equal.
		return unreadableArgs
	}
	return out
}

// unreadableArgs stands for arguments that cannot be compared; it is not
// JSON, so no canonical value equals it.
var unreadableArgs = json.RawMessage("\x00unreadable")
