// Package demo owns `acp-broker demo`: the built-in example agent, the
// scripted editor that talks to it through a real broker process, and the
// transcript that shows a person what crossed the broker each way.
//
// The demo uses the broker only as a black box, the way a user does: it
// starts the acp-broker binary as a subprocess with a rule file of its own,
// speaks ACP over its stdin and stdout, and afterwards reads the broker's
// --trace and --audit files to show what the broker decided and why. It
// must not import the broker's own packages (session, jsonrpc, permission,
// rules), so it shows what the broker really does rather than what its code
// claims. Both ends of the conversation use github.com/coder/acp-go-sdk, a
// third-party ACP implementation.
//
// Nothing here touches the user's files or settings: the broker gets
// XDG_CONFIG_HOME and XDG_STATE_HOME inside the demo's temporary
// directory, the agent's file requests are answered inside a workspace
// there, the directory is removed at the end, and the example agent runs
// no commands (its tool calls are scripted).
package demo
