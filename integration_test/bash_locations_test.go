//go:build linux

package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// The tests in this file pin what a command rule covers of the locations
// claude-agent-acp 0.101 puts in a Bash permission request: the files the
// command names (its SDK's blockedPath; `touch claude-marker.txt` comes with
// <cwd>/claude-marker.txt). A location that is exactly one of the command's
// own arguments, inside the session's directories, is covered by the rule
// that allows the command; deny and ask rules on it, protected paths and
// every other location still decide.

const bashLocationRules = `[[rule]]
id = "touch"
decision = "allow"
command = "touch *"

[[rule]]
id = "no-generated-edits"
decision = "deny"
reason = "generated code is rebuilt, not edited"
path = "./gen/**"

[[rule]]
id = "docs-asked"
decision = "ask"
path = "./docs/**"
`

// claudeBash is a Bash permission request as claude-agent-acp 0.101 sends it
// to a v1 client (permissions/presentation.js, tool-calls/renderer.js
// permissionToolCall): the whole tool call again, with the blocked path as
// its one location, and the options allow-once and reject.
func claudeBash(id int, command, location string) string {
	return permission(fmt.Sprint(id), fmt.Sprintf(`{"toolCallId":"toolu_b%d","name":"Bash","status":"pending","rawInput":{"command":%q,"description":"Create the marker file"},"title":%q,"kind":"execute","content":[{"type":"content","content":{"type":"text","text":"Create the marker file"}}],"locations":[{"path":%q}]}`, id, command, command, location),
		`[{"optionId":"allow-once","name":"Yes","kind":"allow_once"},{"optionId":"reject","name":"No","kind":"reject_once"}]`)
}

// claudeBashAnnounced is the tool_call 0.101 sends before the request: no
// locations yet (the Bash reporter has none).
func claudeBashAnnounced(id int, command string) string {
	return toolCallUpdate("tool_call", fmt.Sprintf(`"_meta":{"claudeCode":{"toolName":"Bash"},"terminal_info":{"terminal_id":"toolu_b%d"}},"toolCallId":"toolu_b%d","name":"Bash","rawInput":{"command":%q,"description":"Create the marker file"},"status":"pending","title":%q,"kind":"execute","content":[{"type":"content","content":{"type":"text","text":"Create the marker file"}}]`, id, id, command, command))
}

func TestBashLocationsCoveredByTheCommandRule(t *testing.T) {
	t.Parallel()
	d := startDecider(t, deciderOptions{rules: bashLocationRules, prepare: func(d *decider) {
		for _, dir := range []string{filepath.Join(d.cwd, "docs"), filepath.Join(d.root, "outside")} {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		links := map[string]string{
			"link.txt": filepath.Join(d.cwd, "real.txt"),   // inside: the location names the target
			"away.txt": filepath.Join(d.root, "outside/x"), // out of the project through a link
			"keys":     filepath.Join(homeDir, ".ssh"),     // a protected directory
			"profile":  filepath.Join(homeDir, ".bashrc"),  // a protected file
			"gendir":   filepath.Join(d.cwd, "gen"),        // a denied directory
			"Notes":    filepath.Join(d.cwd, "notes-real"), // a directory link, named with a slash
		}
		for name, target := range links {
			if err := os.Symlink(target, filepath.Join(d.cwd, name)); err != nil {
				t.Fatal(err)
			}
		}
	}})
	reject := func(id int) string { return answer(fmt.Sprint(id), "reject") }
	d.play(t, []decideCase{
		{
			name:   "real_0.101_request_after_its_tool_call_allowed",
			before: []string{claudeBashAnnounced(1, "touch claude-marker.txt")},
			req:    claudeBash(1, "touch claude-marker.txt", "$CWD/claude-marker.txt"),
			option: "allow-once",
		},
		{
			name:   "the_request_alone_allowed",
			req:    claudeBash(2, "touch claude-marker.txt", "$CWD/claude-marker.txt"),
			option: "allow-once",
		},
		{
			name:   "an_argument_with_dot_dot_inside_the_project_is_the_same_file",
			req:    claudeBash(3, "touch sub/../claude-marker.txt", "$CWD/claude-marker.txt"),
			option: "allow-once",
		},
		{
			name:   "an_absolute_argument_allowed",
			req:    claudeBash(4, "touch $CWD/src/new.go", "$CWD/src/new.go"),
			option: "allow-once",
		},
		{
			name:   "a_trailing_slash_names_the_same_path",
			req:    claudeBash(5, "touch notes/", "$CWD/notes/"),
			option: "allow-once",
		},
		{
			name:   "another_letter_case_is_another_file",
			req:    claudeBash(6, "touch claude-marker.txt", "$CWD/Claude-Marker.txt"),
			answer: reject(6),
		},
		{
			name:   "the_target_of_a_link_is_not_the_argument",
			req:    claudeBash(7, "touch link.txt", "$CWD/real.txt"),
			answer: reject(7),
		},
		{
			name:   "a_link_out_of_the_project_needs_its_own_allowance",
			req:    claudeBash(8, "touch away.txt", "$CWD/away.txt"),
			answer: reject(8),
		},
		{
			name:   "an_argument_outside_the_project_needs_its_own_allowance",
			req:    claudeBash(9, "touch ../outside/x", "$ROOT/outside/x"),
			answer: reject(9),
		},
		{
			name:   "the_same_name_in_another_directory_is_not_the_argument",
			req:    claudeBash(10, "touch claude-marker.txt", "$LIB/claude-marker.txt"),
			answer: reject(10),
		},
		{
			name:   "an_argument_inside_a_substitution_is_not_seen",
			req:    claudeBash(11, "touch $(echo claude-marker.txt)", "$CWD/claude-marker.txt"),
			answer: reject(11),
		},
		{
			name:   "an_argument_from_a_variable_is_not_seen",
			req:    claudeBash(12, `touch "$F"`, "$CWD/claude-marker.txt"),
			answer: reject(12),
		},
		{
			name:   "a_protected_argument_asked",
			req:    claudeBash(13, "touch .env", "$CWD/.env"),
			answer: reject(13),
		},
		{
			name:   "a_git_hook_asked",
			req:    claudeBash(14, "touch .git/hooks/pre-commit", "$CWD/.git/hooks/pre-commit"),
			answer: reject(14),
		},
		{
			name:   "a_link_to_a_protected_directory_asked",
			req:    claudeBash(15, "touch keys/", "$CWD/keys/"),
			answer: reject(15),
		},
		{
			name:   "a_link_to_a_protected_file_asked",
			req:    claudeBash(16, "touch profile", "$CWD/profile"),
			answer: reject(16),
		},
		{
			name:   "a_deny_rule_on_the_location_rejects",
			req:    claudeBash(17, "touch gen/api.go", "$CWD/gen/api.go"),
			option: "reject",
		},
		{
			name:   "a_deny_rule_through_a_link_rejects",
			req:    claudeBash(18, "touch gendir/api.go", "$CWD/gendir/api.go"),
			option: "reject",
		},
		{
			name:   "an_ask_rule_on_the_location_asks",
			req:    claudeBash(19, "touch docs/x.md", "$CWD/docs/x.md"),
			answer: reject(19),
		},
		{
			name: "a_location_the_command_does_not_name_asked",
			req: permission(`20`, `{"toolCallId":"toolu_b20","name":"Bash","status":"pending","rawInput":{"command":"touch a.txt"},"title":"touch a.txt","kind":"execute","content":[],"locations":[{"path":"$CWD/a.txt"},{"path":"$CWD/b.txt"}]}`,
				`[{"optionId":"allow-once","name":"Yes","kind":"allow_once"},{"optionId":"reject","name":"No","kind":"reject_once"}]`),
			answer: reject(20),
		},
		{
			name:   "a_redirection_to_the_same_file_still_needs_its_own_allowance",
			req:    claudeBash(21, "touch out.txt > out.txt", "$CWD/out.txt"),
			answer: reject(21),
		},
		{
			name: "an_argument_relative_to_the_request_cwd",
			req: permission(`22`, `{"toolCallId":"toolu_b22","kind":"execute","title":"touch m.txt","rawInput":{"command":"touch m.txt","cwd":"$CWD/src"},"locations":[{"path":"$CWD/src/m.txt"}]}`,
				`[{"optionId":"allow-once","name":"Yes","kind":"allow_once"},{"optionId":"reject","name":"No","kind":"reject_once"}]`),
			option: "allow-once",
		},
		{
			name: "the_same_name_under_the_session_cwd_is_not_the_argument_there",
			req: permission(`23`, `{"toolCallId":"toolu_b23","kind":"execute","title":"touch m.txt","rawInput":{"command":"touch m.txt","cwd":"$CWD/src"},"locations":[{"path":"$CWD/m.txt"}]}`,
				`[{"optionId":"allow-once","name":"Yes","kind":"allow_once"},{"optionId":"reject","name":"No","kind":"reject_once"}]`),
			answer: reject(23),
		},
	})
}
