// Package permission decides, live, the agent's requests that the broker may
// answer itself: session/request_permission from the rules and the mode, and,
// as defense in depth, the fs/write_text_file and terminal/create requests
// the agent sends without asking, which go on only when the rules allow them
// or an allowed permission request of the agent covers them, and are asked
// with the broker's own prompt otherwise. It keeps the rules fresh as their
// files change, routes what they leave open to the editor and the notify channels (first
// answer wins), remembers "always" answers, tells the editor why when it
// answers a request itself, and writes the audit log. The agent's questions
// (elicitation/create) take the same routes, and only a human answers them:
// no rule, mode or remembered answer does; nor does anything answer the
// requests that only look like permissions (questions, plan reviews, mode
// switches) but a human.
//
// It plugs into the relay through session.Policy and decides on the merged
// tool-call view that package session keeps; it never reads or writes the
// wire itself, answers only through the session.Call it was given, and
// leaves what a request means to package rules.
package permission
