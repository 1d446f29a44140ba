// Package demo owns `acp-broker demo`: the built-in example agent, the
// scripted editor that talks to it through a real broker process, and the
// transcript that shows a person what crossed the broker each way.
//
// The demo uses the broker only as a black box, the way an editor does: it
// starts the acp-broker binary as a subprocess and speaks ACP over its stdin
// and stdout. It must not import the broker's own packages (session,
// jsonrpc, permission), so it shows what the broker really does rather than
// what its code claims. Both ends of the conversation use
// github.com/coder/acp-go-sdk, a third-party ACP implementation.
//
// Nothing here touches the user's files: the agent's file requests are
// answered inside a temporary workspace that the demo creates and removes,
// and the example agent runs no commands (its tool calls are scripted).
package demo
