//go:build linux

package integration

import "testing"

// TestConversation plays ACP conversations with the puppet agent, directly
// and through the broker. Every line must arrive unchanged, and the two runs
// must leave identical transcripts on both sides: with the default policy and
// the MCP proxy off (the one change the broker makes to a message; see
// mcp_test.go) the broker is invisible.
func TestConversation(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name     string
		scenario func(t *testing.T, s *session)
	}{
		{"initialize", scenarioInitialize},
		{"session_new_then_update", scenarioSessionNew},
		{"prompt_turn_streaming", scenarioPromptTurn},
		{"permission", scenarioPermission},
		{"permission_edge_cases", scenarioPermissionEdgeCases},
		{"malformed_acp_params", scenarioMalformedParams},
		{"fs_and_terminal", scenarioFSAndTerminal},
		{"extensions_and_unknown_fields", scenarioExtensions},
		{"cancellation", scenarioCancellation},
		{"ids", scenarioIDs},
		{"null_id", scenarioNullID},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			runBoth(t, c.scenario)
		})
	}
}

const (
	msgInitialize     = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{"fs":{"readTextFile":true,"writeTextFile":true},"terminal":true},"clientInfo":{"name":"zed","title":"Zed","version":"0.201.3"}}}`
	msgInitialized    = `{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1,"agentCapabilities":{"loadSession":true,"promptCapabilities":{"image":true,"audio":false,"embeddedContext":true},"mcpCapabilities":{"http":true,"sse":false},"sessionCapabilities":{"list":{},"resume":{}}},"authMethods":[{"id":"oauth","name":"Log in with a browser","description":null}],"agentInfo":{"name":"fake-agent","version":"1.0.0"}}}`
	msgSessionNew     = `{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/home/user/project","additionalDirectories":["/home/user/lib"],"mcpServers":[{"name":"fs","command":"/usr/bin/mcp-fs","args":["--root","/home/user/project"],"env":[{"name":"TOKEN","value":"s3cret"}]},{"type":"http","name":"web","url":"https://mcp.example.invalid/mcp","headers":[{"name":"Authorization","value":"Bearer x"}]}]}}`
	msgSessionCreated = `{"jsonrpc":"2.0","id":2,"result":{"sessionId":"sess_1","modes":{"currentModeId":"default","availableModes":[{"id":"default","name":"Default","description":"Ask before edits"},{"id":"acceptEdits","name":"Accept Edits"},{"id":"plan","name":"Plan"}]},"configOptions":[]}}`
)

func scenarioInitialize(t *testing.T, s *session) {
	s.EditorToAgent(msgInitialize)
	s.AgentToEditor(msgInitialized)
	s.EditorToAgent(`{"jsonrpc":"2.0","id":1,"method":"authenticate","params":{"methodId":"oauth"}}`)
	s.AgentToEditor(`{"jsonrpc":"2.0","id":1,"result":{}}`)
}

// scenarioSessionNew pins the ordering rule from the ACP notes: the agent
// answers session/new and immediately, in the same burst, sends updates for
// the new session; the editor must see the response first.
func scenarioSessionNew(t *testing.T, s *session) {
	s.EditorToAgent(msgInitialize)
	s.AgentToEditor(msgInitialized)
	s.EditorToAgent(msgSessionNew)
	s.AgentSend(
		msgSessionCreated,
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess_1","update":{"sessionUpdate":"available_commands_update","availableCommands":[{"name":"init","description":"Create AGENTS.md","input":null},{"name":"review","description":"Review changes","input":{"hint":"what to review"}}]}}}`,
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess_1","update":{"sessionUpdate":"current_mode_update","currentModeId":"default"}}}`,
	)
	first := s.EditorRecv()
	if first != msgSessionCreated {
		t.Fatalf("editor saw %s before the session/new response", clip(first))
	}
	s.EditorExpect(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess_1","update":{"sessionUpdate":"available_commands_update","availableCommands":[{"name":"init","description":"Create AGENTS.md","input":null},{"name":"review","description":"Review changes","input":{"hint":"what to review"}}]}}}`)
	s.EditorExpect(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess_1","update":{"sessionUpdate":"current_mode_update","currentModeId":"default"}}}`)
	s.EditorToAgent(`{"jsonrpc":"2.0","id":3,"method":"session/load","params":{"sessionId":"sess_0","cwd":"/home/user/project","mcpServers":[]}}`)
	s.AgentToEditor(
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess_0","update":{"sessionUpdate":"user_message_chunk","content":{"type":"text","text":"earlier question"}}}}`,
		`{"jsonrpc":"2.0","id":3,"result":{}}`,
	)
}

func scenarioPromptTurn(t *testing.T, s *session) {
	s.EditorToAgent(msgInitialize)
	s.AgentToEditor(msgInitialized)
	s.EditorToAgent(msgSessionNew)
	s.AgentToEditor(msgSessionCreated)
	s.EditorToAgent(`{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"sess_1","prompt":[{"type":"text","text":"Fix the failing test"},{"type":"resource_link","uri":"file:///home/user/project/main_test.go","name":"main_test.go","mimeType":"text/x-go"},{"type":"resource","resource":{"uri":"file:///home/user/project/main.go","text":"package main\n\nfunc main() {}\n","mimeType":"text/x-go"}}]}}`)
	s.AgentToEditor(
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess_1","update":{"sessionUpdate":"agent_thought_chunk","content":{"type":"text","text":"Let me look at the test."}}}}`,
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess_1","update":{"sessionUpdate":"plan","entries":[{"content":"Read the test","priority":"high","status":"in_progress"},{"content":"Fix the code","priority":"medium","status":"pending"}]}}}`,
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess_1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"I'll "}}}}`,
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess_1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"read the "}}}}`,
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess_1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"test first."}}}}`,
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess_1","update":{"sessionUpdate":"tool_call","toolCallId":"call_1","title":"Read main_test.go","kind":"read","status":"pending","locations":[{"path":"/home/user/project/main_test.go","line":1}],"rawInput":{"file_path":"/home/user/project/main_test.go"},"_meta":{"claudeCode":{"toolName":"Read"}}}}}`,
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess_1","update":{"sessionUpdate":"tool_call_update","toolCallId":"call_1","status":"in_progress"}}}`,
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess_1","update":{"sessionUpdate":"tool_call_update","toolCallId":"call_1","status":"completed","content":[{"type":"content","content":{"type":"text","text":"func TestMain(t *testing.T) {}"}}],"rawOutput":{"lines":1}}}}`,
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess_1","update":{"sessionUpdate":"tool_call","toolCallId":"call_2","title":"Edit main.go","kind":"edit","status":"completed","content":[{"type":"diff","path":"/home/user/project/main.go","oldText":"func main() {}","newText":"func main() { run() }"}]}}}`,
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess_1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"Done."}}}}`,
		`{"jsonrpc":"2.0","id":3,"result":{"stopReason":"end_turn","usage":{"inputTokens":1200,"outputTokens":80}}}`,
	)
}

// scenarioPermission: permission requests the default policy asks the user
// about (commands, edits, mode switches) must pass both ways untouched.
// (Requests that the policy decides itself, such as reads under the safe
// defaults, are the policy's business and are not relayed.)
func scenarioPermission(t *testing.T, s *session) {
	s.EditorToAgent(msgInitialize)
	s.AgentToEditor(msgInitialized)
	s.EditorToAgent(msgSessionNew)
	s.AgentToEditor(msgSessionCreated)
	s.EditorToAgent(`{"jsonrpc":"2.0","id":4,"method":"session/prompt","params":{"sessionId":"sess_1","prompt":[{"type":"text","text":"push it"}]}}`)
	s.AgentToEditor(
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess_1","update":{"sessionUpdate":"tool_call","toolCallId":"call_1","title":"git push","kind":"execute","status":"pending","rawInput":{"command":"git push"}}}}`,
		`{"jsonrpc":"2.0","id":5,"method":"session/request_permission","params":{"sessionId":"sess_1","toolCall":{"toolCallId":"call_1","title":"git push","kind":"execute","rawInput":{"command":"git push"}},"options":[{"optionId":"allow-once","name":"Allow","kind":"allow_once"},{"optionId":"allow-always","name":"Always allow","kind":"allow_always"},{"optionId":"reject","name":"Reject","kind":"reject_once"}]}}`,
	)
	s.EditorToAgent(`{"jsonrpc":"2.0","id":5,"result":{"outcome":{"outcome":"selected","optionId":"allow-once"}}}`)
	s.AgentToEditor(
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess_1","update":{"sessionUpdate":"tool_call_update","toolCallId":"call_1","status":"completed"}}}`,
		// codex-style: argv array, no kind on the request itself.
		`{"jsonrpc":"2.0","id":6,"method":"session/request_permission","params":{"sessionId":"sess_1","toolCall":{"toolCallId":"call_2","rawInput":{"command":["rm","-rf","build"],"cwd":"/home/user/project","reason":"clean"}},"options":[{"optionId":"approved","name":"Yes","kind":"allow_once"},{"optionId":"approved-for-session","name":"Always","kind":"allow_always"},{"optionId":"denied","name":"No","kind":"reject_once"},{"optionId":"abort","name":"No, and stop","kind":"reject_once"}]}}`,
	)
	s.EditorToAgent(`{"jsonrpc":"2.0","id":6,"result":{"outcome":{"outcome":"selected","optionId":"denied"}}}`)
	// A switch_mode request: exactly the kind a broker must never auto-answer.
	s.AgentToEditor(`{"jsonrpc":"2.0","id":7,"method":"session/request_permission","params":{"sessionId":"sess_1","toolCall":{"toolCallId":"call_3","title":"Ready to code?","kind":"switch_mode"},"options":[{"optionId":"acceptEdits","name":"Yes, and auto-accept edits","kind":"allow_always"},{"optionId":"default","name":"Yes, and manually approve edits","kind":"allow_once"},{"optionId":"plan","name":"No, keep planning","kind":"reject_once"}]}}`)
	s.EditorToAgent(`{"jsonrpc":"2.0","id":7,"result":{"outcome":{"outcome":"selected","optionId":"default"}}}`)
	s.AgentToEditor(`{"jsonrpc":"2.0","id":4,"result":{"stopReason":"end_turn"}}`)
}

// scenarioPermissionEdgeCases: permission requests (the method the broker
// intercepts, here all of kinds it asks the user about) in the middle of a
// burst of updates, with an id that equals a
// pending editor request, answered out of order, and cancelled by the agent
// with $/cancel_request. Order and bytes must be kept throughout.
func scenarioPermissionEdgeCases(t *testing.T, s *session) {
	s.EditorToAgent(msgInitialize)
	s.AgentToEditor(msgInitialized)
	s.EditorToAgent(msgSessionNew)
	s.AgentToEditor(msgSessionCreated)
	s.EditorToAgent(`{"jsonrpc":"2.0","id":5,"method":"session/prompt","params":{"sessionId":"sess_1","prompt":[{"type":"text","text":"go"}]}}`)
	s.AgentToEditor(
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess_1","update":{"sessionUpdate":"tool_call","toolCallId":"call_1","title":"make deploy","kind":"execute","status":"pending","_meta":{"claudeCode":{"toolName":"Bash"}}}}}`,
		// Same id as the editor's pending session/prompt, in the other direction.
		`{"jsonrpc":"2.0","id":5,"method":"session/request_permission","params":{"sessionId":"sess_1","toolCall":{"toolCallId":"call_1"},"options":[{"optionId":"allow","name":"Allow","kind":"allow_once"},{"optionId":"reject","name":"Reject","kind":"reject_once"}]}}`,
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess_1","update":{"sessionUpdate":"tool_call","toolCallId":"call_2","title":"Write config.json","kind":"edit","status":"pending"}}}`,
		`{"jsonrpc":"2.0","id":"perm-b","method":"session/request_permission","params":{"sessionId":"sess_1","toolCall":{"toolCallId":"call_2","title":"Write config.json"},"options":[{"optionId":"allow","name":"Allow","kind":"allow_once"}],"_meta":{"x":1}}}`,
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess_1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"waiting for you"}}}}`,
		`{"jsonrpc":"2.0","id":8,"method":"session/request_permission","params":{"sessionId":"sess_1","toolCall":{"toolCallId":"call_3","title":"rm x","kind":"delete"},"options":[{"optionId":"allow","name":"Allow","kind":"allow_once"}]}}`,
		`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":8}}`,
	)
	// Answered out of order; the cancelled one with -32800.
	s.EditorToAgent(
		`{"jsonrpc":"2.0","id":8,"error":{"code":-32800,"message":"Request cancelled"}}`,
		`{"jsonrpc":"2.0","id":"perm-b","result":{"outcome":{"outcome":"selected","optionId":"allow"},"_meta":{"answeredBy":"user"}}}`,
		`{"jsonrpc":"2.0","id":5,"result":{"outcome":{"outcome":"selected","optionId":"reject"}}}`,
	)
	s.AgentToEditor(
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess_1","update":{"sessionUpdate":"tool_call_update","toolCallId":"call_1","status":"failed"}}}`,
		`{"jsonrpc":"2.0","id":5,"result":{"stopReason":"end_turn"}}`,
	)
	// A permission request for a session the broker never saw created.
	s.AgentToEditor(`{"jsonrpc":"2.0","id":9,"method":"session/request_permission","params":{"sessionId":"unknown","toolCall":{"toolCallId":"c"},"options":[]}}`)
	s.EditorToAgent(`{"jsonrpc":"2.0","id":9,"result":{"outcome":{"outcome":"cancelled"}}}`)
}

// scenarioMalformedParams: messages the broker inspects (session/update,
// session/request_permission, session/cancel, $/cancel_request) with params
// of unexpected shapes. They are valid JSON-RPC (params, when present, is an
// object or an array), so they pass untouched.
func scenarioMalformedParams(t *testing.T, s *session) {
	s.AgentToEditor(
		`{"jsonrpc":"2.0","method":"session/update","params":[]}`,
		`{"jsonrpc":"2.0","method":"session/update"}`,
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":5,"update":null}}`,
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"tool_call","toolCallId":17,"kind":["execute"],"rawInput":"not an object"}}}`,
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"tool_call_update","toolCallId":"never-started","status":42}}}`,
		`{"jsonrpc":"2.0","method":"$/cancel_request","params":{}}`,
		`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":{"odd":true}}}`,
	)
	s.AgentToEditor(`{"jsonrpc":"2.0","id":1,"method":"session/request_permission","params":{"sessionId":"s","toolCall":"not an object","options":"none"}}`)
	s.EditorToAgent(`{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"Invalid params"}}`)
	s.AgentToEditor(`{"jsonrpc":"2.0","id":2,"method":"session/request_permission"}`)
	s.EditorToAgent(`{"jsonrpc":"2.0","id":2,"error":{"code":-32602,"message":"Invalid params"}}`)
	s.AgentToEditor(`{"jsonrpc":"2.0","id":3,"method":"session/request_permission","params":{"sessionId":["s"],"toolCall":{"toolCallId":null}}}`)
	s.EditorToAgent(`{"jsonrpc":"2.0","id":3,"result":{"outcome":{"outcome":"cancelled"}}}`)
	s.EditorToAgent(
		`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":123}}`,
		`{"jsonrpc":"2.0","method":"session/cancel"}`,
		`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":null}}`,
	)
	s.EditorToAgent(`{"jsonrpc":"2.0","id":4,"method":"session/new","params":[]}`)
	s.AgentToEditor(`{"jsonrpc":"2.0","id":4,"error":{"code":-32602,"message":"Invalid params"}}`)
	s.EditorToAgent(`{"jsonrpc":"2.0","id":5,"method":"session/prompt","params":{"sessionId":{},"prompt":"x"}}`)
	s.AgentToEditor(`{"jsonrpc":"2.0","id":5,"result":{"stopReason":"end_turn"}}`)
}

func scenarioFSAndTerminal(t *testing.T, s *session) {
	s.EditorToAgent(msgInitialize)
	s.AgentToEditor(msgInitialized)
	s.EditorToAgent(msgSessionNew)
	s.AgentToEditor(msgSessionCreated)
	s.EditorToAgent(`{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"sess_1","prompt":[{"type":"text","text":"update the changelog and run the tests"}]}}`)
	s.AgentToEditor(`{"jsonrpc":"2.0","id":0,"method":"fs/read_text_file","params":{"sessionId":"sess_1","path":"/home/user/project/CHANGELOG.md","line":1,"limit":20}}`)
	s.EditorToAgent(`{"jsonrpc":"2.0","id":0,"result":{"content":"# Changelog\n\n## v1.0.0\n- first\n"}}`)
	s.AgentToEditor(`{"jsonrpc":"2.0","id":1,"method":"fs/read_text_file","params":{"sessionId":"sess_1","path":"/home/user/project/missing.md"}}`)
	s.EditorToAgent(`{"jsonrpc":"2.0","id":1,"error":{"code":-32002,"message":"Resource not found","data":{"uri":"file:///home/user/project/missing.md"}}}`)
	// The agent asks before it writes and before it runs a command, so the
	// broker, which would otherwise ask itself, forwards both unchanged.
	s.AgentToEditor(`{"jsonrpc":"2.0","id":10,"method":"session/request_permission","params":{"sessionId":"sess_1","toolCall":{"toolCallId":"call_8","title":"Edit CHANGELOG.md","kind":"edit","locations":[{"path":"/home/user/project/CHANGELOG.md"}]},"options":[{"optionId":"allow","name":"Allow","kind":"allow_once"},{"optionId":"reject","name":"Reject","kind":"reject_once"}]}}`)
	s.EditorToAgent(`{"jsonrpc":"2.0","id":10,"result":{"outcome":{"outcome":"selected","optionId":"allow"}}}`)
	s.AgentToEditor(`{"jsonrpc":"2.0","id":2,"method":"fs/write_text_file","params":{"sessionId":"sess_1","path":"/home/user/project/CHANGELOG.md","content":"# Changelog\n\n## v1.1.0\n- second\n\n## v1.0.0\n- first\n"}}`)
	s.EditorToAgent(`{"jsonrpc":"2.0","id":2,"result":null}`)
	s.AgentToEditor(`{"jsonrpc":"2.0","id":11,"method":"session/request_permission","params":{"sessionId":"sess_1","toolCall":{"toolCallId":"call_9","title":"go test ./...","kind":"execute","rawInput":{"command":"go test ./..."}},"options":[{"optionId":"allow","name":"Allow","kind":"allow_once"},{"optionId":"reject","name":"Reject","kind":"reject_once"}]}}`)
	s.EditorToAgent(`{"jsonrpc":"2.0","id":11,"result":{"outcome":{"outcome":"selected","optionId":"allow"}}}`)
	s.AgentToEditor(`{"jsonrpc":"2.0","id":3,"method":"terminal/create","params":{"sessionId":"sess_1","command":"go","args":["test","./..."],"cwd":"/home/user/project","outputByteLimit":1048576}}`)
	s.EditorToAgent(`{"jsonrpc":"2.0","id":3,"result":{"terminalId":"term_1"}}`)
	s.AgentToEditor(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess_1","update":{"sessionUpdate":"tool_call","toolCallId":"call_9","title":"go test ./...","kind":"execute","status":"in_progress","content":[{"type":"terminal","terminalId":"term_1"}]}}}`)
	s.AgentToEditor(`{"jsonrpc":"2.0","id":4,"method":"terminal/wait_for_exit","params":{"sessionId":"sess_1","terminalId":"term_1"}}`)
	s.EditorToAgent(`{"jsonrpc":"2.0","id":4,"result":{"exitCode":0,"signal":null}}`)
	s.AgentToEditor(`{"jsonrpc":"2.0","id":5,"method":"terminal/output","params":{"sessionId":"sess_1","terminalId":"term_1"}}`)
	s.EditorToAgent(`{"jsonrpc":"2.0","id":5,"result":{"output":"ok  \tgithub.com/x/y\t0.01s\n","truncated":false,"exitStatus":{"exitCode":0,"signal":null}}}`)
	s.AgentToEditor(`{"jsonrpc":"2.0","id":6,"method":"terminal/kill","params":{"sessionId":"sess_1","terminalId":"term_1"}}`)
	s.EditorToAgent(`{"jsonrpc":"2.0","id":6,"result":{}}`)
	s.AgentToEditor(`{"jsonrpc":"2.0","id":7,"method":"terminal/release","params":{"sessionId":"sess_1","terminalId":"term_1"}}`)
	s.EditorToAgent(`{"jsonrpc":"2.0","id":7,"result":null}`)
	s.AgentToEditor(`{"jsonrpc":"2.0","id":3,"result":{"stopReason":"end_turn"}}`)
}

// scenarioExtensions covers what the broker does not understand: extension
// and future methods, unknown fields, _meta everywhere, unusual number
// spellings and key orders. All of it must pass untouched.
func scenarioExtensions(t *testing.T, s *session) {
	s.EditorToAgent(msgInitialize)
	s.AgentToEditor(msgInitialized)
	// Unknown extension request from the editor, answered -32601.
	s.EditorToAgent(`{"jsonrpc":"2.0","id":10,"method":"_vendor/thing","params":{"a":1}}`)
	s.AgentToEditor(`{"jsonrpc":"2.0","id":10,"error":{"code":-32601,"message":"Method not found","data":{"method":"_vendor/thing"}}}`)
	// And from the agent.
	s.AgentToEditor(`{"jsonrpc":"2.0","id":"ext-1","method":"_vendor/thing","params":{}}`)
	s.EditorToAgent(`{"jsonrpc":"2.0","id":"ext-1","error":{"code":-32601,"message":"Method not found"}}`)
	// Unknown notifications both ways, extension and future core methods.
	s.EditorToAgent(
		`{"jsonrpc":"2.0","method":"_vendor/notice","params":{"_meta":{"k":"v"}}}`,
		`{"jsonrpc":"2.0","method":"document/didOpen","params":{"uri":"file:///a.go","languageId":"go","version":1,"text":""}}`,
		`{"jsonrpc":"2.0","method":"nes/accept","params":{"id":"n1"}}`,
	)
	s.AgentToEditor(
		`{"jsonrpc":"2.0","method":"_zed.dev/progress","params":{"percent":50}}`,
		`{"jsonrpc":"2.0","method":"elicitation/complete","params":{"elicitationId":"e1"}}`,
	)
	// Future core requests both ways.
	s.EditorToAgent(`{"jsonrpc":"2.0","id":11,"method":"session/fork","params":{"sessionId":"sess_1","cwd":"/tmp","mcpServers":[]}}`)
	s.AgentToEditor(`{"jsonrpc":"2.0","id":11,"result":{"sessionId":"sess_2"}}`)
	s.AgentToEditor(`{"jsonrpc":"2.0","id":12,"method":"elicitation/create","params":{"sessionId":"sess_1","message":"Which branch?","requestedSchema":{"type":"object","properties":{"branch":{"type":"string"}}}}}`)
	s.EditorToAgent(`{"jsonrpc":"2.0","id":12,"result":{"action":"accept","content":{"branch":"main"}}}`)
	s.AgentToEditor(`{"jsonrpc":"2.0","id":13,"method":"mcp/connect","params":{"server":"web"}}`)
	s.EditorToAgent(`{"jsonrpc":"2.0","id":13,"result":{"connectionId":"c1"}}`)
	// Unknown fields and _meta at every level.
	s.EditorToAgent(`{"jsonrpc":"2.0","id":14,"method":"session/prompt","params":{"sessionId":"sess_1","prompt":[{"type":"text","text":"hi","_meta":{"x":1},"annotations":{"audience":["user"],"priority":0.5}}],"_meta":{"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},"futureField":{"nested":[1,[2,[3]],{"deep":null}]}},"_meta":{"top":true},"extra":"top-level field"}`)
	s.AgentToEditor(`{"jsonrpc":"2.0","id":14,"result":{"stopReason":"end_turn","_meta":{"cost":{"usd":0.25}},"newThing":[]},"_meta":{}}`)
	// Number spellings a re-encoder would change.
	s.EditorToAgent(`{"jsonrpc":"2.0","method":"_vendor/numbers","params":{"a":1.0e2,"b":1E2,"c":1e+2,"d":-0,"e":-0.0,"f":0.1000000000000000055511151231257827,"g":100000000000000000000000,"h":1e-7,"i":5e-324,"j":1.7976931348623157e308,"k":9007199254740993}}`)
	s.AgentToEditor(`{"jsonrpc":"2.0","id":15,"method":"fs/read_text_file","params":{"sessionId":"sess_1","path":"/x","line":1.0e2,"limit":2E1}}`)
	s.EditorToAgent(`{"jsonrpc":"2.0","id":15,"result":{"content":"","size":123456789012345678901234567890}}`)
	// Key orders: jsonrpc last, id first, params before method.
	s.EditorToAgent(`{"id":16,"params":{"sessionId":"sess_1","prompt":[]},"method":"session/prompt","jsonrpc":"2.0"}`)
	s.AgentToEditor(
		`{"params":{"update":{"content":{"text":"z","type":"text"},"sessionUpdate":"agent_message_chunk"},"sessionId":"sess_1"},"method":"session/update","jsonrpc":"2.0"}`,
		`{"result":{"stopReason":"end_turn"},"id":16,"jsonrpc":"2.0"}`,
	)
	// Members with an explicit null and an empty params object.
	s.EditorToAgent(`{"jsonrpc":"2.0","id":17,"method":"_vendor/empty","params":{}}`)
	s.AgentToEditor(`{"jsonrpc":"2.0","id":17,"result":{}}`)
	s.EditorToAgent(`{"jsonrpc":"2.0","method":"_vendor/noparams"}`)
}

// scenarioCancellation covers session/cancel (with the pending permission
// request answered "cancelled") and $/cancel_request in both directions.
func scenarioCancellation(t *testing.T, s *session) {
	s.EditorToAgent(msgInitialize)
	s.AgentToEditor(msgInitialized)
	s.EditorToAgent(msgSessionNew)
	s.AgentToEditor(msgSessionCreated)
	s.EditorToAgent(`{"jsonrpc":"2.0","id":20,"method":"session/prompt","params":{"sessionId":"sess_1","prompt":[{"type":"text","text":"delete everything"}]}}`)
	s.AgentToEditor(
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess_1","update":{"sessionUpdate":"tool_call","toolCallId":"call_1","title":"rm -rf /","kind":"delete","status":"pending"}}}`,
		`{"jsonrpc":"2.0","id":9,"method":"session/request_permission","params":{"sessionId":"sess_1","toolCall":{"toolCallId":"call_1"},"options":[{"optionId":"allow","name":"Allow","kind":"allow_once"},{"optionId":"reject","name":"Reject","kind":"reject_once"}]}}`,
	)
	s.EditorToAgent(
		`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"sess_1"}}`,
		`{"jsonrpc":"2.0","id":9,"result":{"outcome":{"outcome":"cancelled"}}}`,
	)
	s.AgentToEditor(
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess_1","update":{"sessionUpdate":"tool_call_update","toolCallId":"call_1","status":"failed"}}}`,
		`{"jsonrpc":"2.0","id":20,"result":{"stopReason":"cancelled"}}`,
	)
	// $/cancel_request from the editor: the request is still answered, with -32800.
	s.EditorToAgent(
		`{"jsonrpc":"2.0","id":"slow-1","method":"_vendor/slow","params":{}}`,
		`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":"slow-1"}}`,
	)
	s.AgentToEditor(`{"jsonrpc":"2.0","id":"slow-1","error":{"code":-32800,"message":"Request cancelled"}}`)
	// From the agent.
	s.AgentToEditor(
		`{"jsonrpc":"2.0","id":10,"method":"fs/read_text_file","params":{"sessionId":"sess_1","path":"/big.log"}}`,
		`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":10}}`,
	)
	s.EditorToAgent(`{"jsonrpc":"2.0","id":10,"error":{"code":-32800,"message":"Request cancelled"}}`)
	// A cancellation for a request that was already answered, or never existed.
	s.EditorToAgent(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":20}}`)
	s.AgentToEditor(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":"nope"}}`)
	// The cancelled session goes on.
	s.EditorToAgent(`{"jsonrpc":"2.0","id":21,"method":"session/prompt","params":{"sessionId":"sess_1","prompt":[{"type":"text","text":"never mind"}]}}`)
	s.AgentToEditor(`{"jsonrpc":"2.0","id":21,"result":{"stopReason":"end_turn"}}`)
}

// scenarioIDs uses string and integer ids of every shape, the same id values
// pending in both directions at once, and answers out of order.
func scenarioIDs(t *testing.T, s *session) {
	s.EditorToAgent(msgInitialize)
	s.AgentToEditor(msgInitialized)
	editorReqs := []string{
		`{"jsonrpc":"2.0","id":"abc","method":"_vendor/a","params":{}}`,
		`{"jsonrpc":"2.0","id":"","method":"_vendor/b","params":{}}`,
		`{"jsonrpc":"2.0","id":"550e8400-e29b-41d4-a716-446655440000","method":"_vendor/c","params":{}}`,
		`{"jsonrpc":"2.0","id":"caf\u00e9 \"q\"","method":"_vendor/d","params":{}}`,
		`{"jsonrpc":"2.0","id":1,"method":"_vendor/e","params":{}}`,
		`{"jsonrpc":"2.0","id":"1","method":"_vendor/f","params":{}}`,
		`{"jsonrpc":"2.0","id":-1,"method":"_vendor/g","params":{}}`,
		`{"jsonrpc":"2.0","id":9007199254740993,"method":"_vendor/h","params":{}}`,
		`{"jsonrpc":"2.0","id":18446744073709551616,"method":"_vendor/i","params":{}}`,
		`{"jsonrpc":"2.0","id":1.0e2,"method":"_vendor/j","params":{}}`,
	}
	s.EditorToAgent(editorReqs...)
	// The agent asks the editor with the same id values while all of those are pending.
	agentReqs := []string{
		`{"jsonrpc":"2.0","id":"abc","method":"fs/read_text_file","params":{"sessionId":"s","path":"/a"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"fs/read_text_file","params":{"sessionId":"s","path":"/b"}}`,
		`{"jsonrpc":"2.0","id":"1","method":"fs/read_text_file","params":{"sessionId":"s","path":"/c"}}`,
		`{"jsonrpc":"2.0","id":0,"method":"fs/read_text_file","params":{"sessionId":"s","path":"/d"}}`,
	}
	s.AgentToEditor(agentReqs...)
	// Answers, in reverse order, interleaved between the two directions.
	s.EditorToAgent(`{"jsonrpc":"2.0","id":0,"result":{"content":"d"}}`)
	s.AgentToEditor(
		`{"jsonrpc":"2.0","id":1.0e2,"result":"j"}`,
		`{"jsonrpc":"2.0","id":18446744073709551616,"result":"i"}`,
		`{"jsonrpc":"2.0","id":9007199254740993,"result":"h"}`,
	)
	s.EditorToAgent(
		`{"jsonrpc":"2.0","id":"1","result":{"content":"c"}}`,
		`{"jsonrpc":"2.0","id":1,"result":{"content":"b"}}`,
	)
	s.AgentToEditor(
		`{"jsonrpc":"2.0","id":-1,"result":"g"}`,
		`{"jsonrpc":"2.0","id":"1","result":"f"}`,
		`{"jsonrpc":"2.0","id":1,"result":"e"}`,
	)
	s.EditorToAgent(`{"jsonrpc":"2.0","id":"abc","result":{"content":"a"}}`)
	s.AgentToEditor(
		`{"jsonrpc":"2.0","id":"caf\u00e9 \"q\"","result":"d"}`,
		`{"jsonrpc":"2.0","id":"550e8400-e29b-41d4-a716-446655440000","result":"c"}`,
		`{"jsonrpc":"2.0","id":"","result":"b"}`,
		`{"jsonrpc":"2.0","id":"abc","result":"a"}`,
	)
	// Notifications carry no id at all.
	s.EditorToAgent(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s"}}`)
	s.AgentToEditor(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"."}}}}`)
}

// scenarioNullID: JSON-RPC 2.0 allows a null request id (discouraged, but
// valid), so it is relayed like any other.
func scenarioNullID(t *testing.T, s *session) {
	s.EditorToAgent(`{"jsonrpc":"2.0","id":null,"method":"_vendor/null","params":{}}`)
	s.AgentToEditor(`{"jsonrpc":"2.0","id":null,"result":{}}`)
}
