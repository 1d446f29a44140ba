package permission

import (
	"fmt"

	"github.com/acp-broker/acp-broker/rules"
)

// sentFor is the option the agent is answered with when a human chose
// chosen for an agent's own session/request_permission. An allow whose
// answer reaches beyond the request (for the turn, the session, for good, or
// a change the broker does not know) would let the agent remember it
// itself: Codex writes a prefix rule, Claude Code a rule in the project's
// .claude/settings.local.json, Gemini CLI stops asking for the session; the
// requests that memory covers never reach the broker again, and its deny and
// ask rules no longer apply to them. So the agent gets the request's own
// once-option (as pickFor chooses it for an allow), and what the answer
// should remember the broker remembers itself, as narrowly as it does
// (remembers).
//
// The human's choice goes to the agent as it is when it is a reject (a
// refusal the agent remembers refuses at least as much), when the request
// is a switch_mode one (the mode chosen is the point of the answer; the
// agent modes guard watches where it leads), or when no option answers
// this request only: the answer is not lost, and agentRemembers says why
// the agent now remembers it itself.
func sentFor(options []option, chosen option, kind string) (sent option, agentRemembers string) {
	if decisionOf(chosen.Kind) != string(rules.Allow) || kind == "switch_mode" || (chosen.Kind == "allow_once" && answersOnlyThis(chosen)) {
		return chosen, ""
	}
	if once, ok := pickFor(options, []string{"allow_once"}); ok {
		return once, ""
	}
	return chosen, fmt.Sprintf("the option %q reaches beyond this request and none offered answers only this one: the agent may remember the answer itself and stop asking for what it covers", chosen.OptionID)
}
