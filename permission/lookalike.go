package permission

import (
	"fmt"
	"strings"

	"github.com/acp-broker/acp-broker/notify"
	"github.com/acp-broker/acp-broker/rules"
)

// Some session/request_permission requests only look like permissions: they
// put a question to the user, or ask the user to agree to a plan or a mode,
// in the shape of a tool approval. Allowing or denying them by rule would
// answer for the human what only the human can say (consent to an MCP
// server's OAuth page, "implement this plan?", "leave plan mode and bypass
// permissions?"), so no rule, remembered answer, default or mode decides
// them, and no answer to them is remembered: they always go to a human.
//
// They are recognised from what the agents send (read in their dist/):
//   - codex-acp 2.x, without client elicitation support, turns an MCP
//     server's URL elicitation (OAuth consent) into a `kind: fetch` request
//     whose toolCallId is "elicitation-<id>", and a message-only form
//     into a `kind: other` one whose toolCallId is
//     "<session>:elicitation:<server>:<n>";
//   - codex-acp 2.x asks to implement a plan as `kind: switch_mode` with
//     toolCallId "plan-review:<item>" (options implement_plan, revise_plan);
//   - claude-agent-acp asks to leave plan mode (ExitPlanMode, options
//     exit-plan-*) or to enter it (EnterPlanMode) as `kind: switch_mode`,
//     the tool named in `name` and `_meta.claudeCode.toolName`;
//   - any agent may ask to switch modes with `kind: switch_mode`.
//
// A mark counts only in the shape its agent sends it (a question's with
// its kind, a plan's with kind switch_mode or none, neither with a command
// or a path): the agent chooses its ids and options, and a command that
// wears one is a command. Each mark is read in any letter case. A lookalike
// is asked where the rules would allow it, never where they deny (see
// Evaluate): the marks are the agent's to write, so they may only make a
// request more guarded.

// lookalikeOf says what a permission request really asks, as the Source of
// its audit line, and why a human answers it; "" when it is a permission.
func lookalikeOf(params permissionParams, req *rules.Request) (source, reason string) {
	id := params.ToolCallID
	lower := strings.ToLower(id)
	kind := strings.ToLower(req.Kind)
	acts := req.Script != nil || len(req.Paths) > 0
	question := !acts && ((kind == "fetch" && strings.HasPrefix(lower, "elicitation-")) ||
		(kind == "other" && (strings.HasPrefix(lower, "elicitation:") || strings.Contains(lower, ":elicitation:"))))
	if question {
		return "question", fmt.Sprintf("the agent asks a question as a permission request (tool call %q, an MCP server's elicitation): only a human answers it", notify.OneLine(id))
	}
	if acts || (kind != "" && kind != "switch_mode") {
		return "", ""
	}
	if strings.HasPrefix(lower, "plan-review:") {
		return "plan review", fmt.Sprintf("the agent asks to implement a plan (tool call %q): only a human agrees to a plan", notify.OneLine(id))
	}
	switch tool := strings.ToLower(req.ToolName); tool {
	case "exitplanmode", "enterplanmode":
		return "plan review", fmt.Sprintf("the agent asks to %s plan mode (%s): only a human agrees to a plan or a mode", map[string]string{"exitplanmode": "leave", "enterplanmode": "enter"}[tool], notify.OneLine(req.ToolName))
	}
	for _, o := range params.Options {
		if o.OptionID == "implement_plan" || strings.HasPrefix(strings.ToLower(o.OptionID), "exit-plan-") {
			return "plan review", fmt.Sprintf("the agent offers %q, an answer to a plan review: only a human agrees to a plan", notify.OneLine(o.OptionID))
		}
	}
	if kind == "switch_mode" {
		return "switch_mode", "a mode switch always goes to the human"
	}
	return "", ""
}
