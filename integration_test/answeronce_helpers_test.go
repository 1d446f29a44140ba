//go:build linux

package integration

import (
	"encoding/json"
	"testing"
)

// agentGets is what the agent is answered with when the editor answers req
// with answer: an answer selecting an allow_always option reaches the agent
// as the request's first allow_once option that describes no reach of its
// own (no _meta), since the broker remembers the "always" itself; every
// other answer, and an always where no such option is offered, reaches it
// unchanged.
func agentGets(t testing.TB, req, answer string) string {
	t.Helper()
	var r struct {
		ID     json.RawMessage `json:"id"`
		Params struct {
			Options []struct {
				OptionID string          `json:"optionId"`
				Kind     string          `json:"kind"`
				Meta     json.RawMessage `json:"_meta"`
			} `json:"options"`
		} `json:"params"`
	}
	var a struct {
		Result struct {
			Outcome struct {
				Outcome  string `json:"outcome"`
				OptionID string `json:"optionId"`
			} `json:"outcome"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(req), &r); err != nil {
		t.Fatalf("agentGets: the request does not parse: %v", err)
	}
	if json.Unmarshal([]byte(answer), &a) != nil || a.Result.Outcome.Outcome != "selected" {
		return answer
	}
	always := false
	for _, o := range r.Params.Options {
		if o.OptionID == a.Result.Outcome.OptionID && o.Kind == "allow_always" {
			always = true
		}
	}
	if !always {
		return answer
	}
	for _, o := range r.Params.Options {
		if o.Kind == "allow_once" && len(o.Meta) == 0 {
			return selected(string(r.ID), o.OptionID)
		}
	}
	return answer
}
