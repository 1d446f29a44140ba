package session

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/acp-broker/acp-broker/jsonrpc"
)

func question(id, sessionID string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"elicitation/create","params":{"sessionId":%q,"mode":"form","message":"Deploy where?","requestedSchema":{"type":"object","properties":{"target":{"type":"string","enum":["staging","production"]}},"required":["target"]}}}`, id, sessionID)
}

func urlQuestion(id, sessionID, elicitationID string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"elicitation/create","params":{"sessionId":%q,"mode":"url","message":"Sign in","url":"https://example.com/login","elicitationId":%q}}`, id, sessionID, elicitationID)
}

// TestQuestionsAreIntercepted: an elicitation/create goes to the Policy,
// which may answer it with a result of its own, once.
func TestQuestionsAreIntercepted(t *testing.T) {
	p := newHoldPolicy()
	h := startBroker(t, p)
	req := question("3", "s1")
	h.agentSends(req)
	c := p.next(t)
	if c.Method != "elicitation/create" || string(c.Raw()) != req || c.SessionID() != "s1" {
		t.Fatalf("call = %s %s %s", c.Method, c.SessionID(), c.Raw())
	}
	won := false
	if !c.RespondAs(map[string]string{"action": "decline"}, func() { won = true }) || !won {
		t.Fatal("the first answer was refused")
	}
	if c.RespondAs(map[string]string{"action": "accept"}, nil) {
		t.Fatal("a second answer was accepted")
	}
	h.expectAgentReceived(`{"jsonrpc":"2.0","id":3,"result":{"action":"decline"}}`)
	h.sync("after")
}

// TestSessionCancelAnswersQuestions: session/cancel answers the session's
// questions with the cancel action, held or forwarded, and withdraws the
// editor's (ACP asks the editor to answer only permission requests after
// a cancel); its late answer is dropped.
func TestSessionCancelAnswersQuestions(t *testing.T) {
	p := newHoldPolicy()
	h := startBroker(t, p)
	h.agentSends(question("1", "s1"))
	held := p.next(t)
	forwardedReq := question("2", "s1")
	h.agentSends(forwardedReq)
	forwarded := p.next(t)
	forwarded.Forward(nil)
	h.expect(forwardedReq)
	h.agentSends(question("3", "s2"))
	other := p.next(t)

	cancel := `{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s1"}}`
	h.send(cancel)
	got := map[string]bool{}
	for range 4 {
		got[h.next()] = true
	}
	for _, want := range []string{
		received(cancel),
		received(`{"jsonrpc":"2.0","id":1,"result":{"action":"cancel"}}`),
		received(`{"jsonrpc":"2.0","id":2,"result":{"action":"cancel"}}`),
		`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":2}}`,
	} {
		if !got[want] {
			t.Errorf("missing %s; got %v", want, got)
		}
	}
	for _, c := range []*Call{held, forwarded} {
		if !errors.Is(context.Cause(c.Context()), ErrSessionCancelled) {
			t.Errorf("call %s: cause %v", c.ID, context.Cause(c.Context()))
		}
		if c.RespondAs(map[string]string{"action": "accept"}, nil) {
			t.Errorf("call %s answered after the cancel", c.ID)
		}
	}
	if other.Context().Err() != nil {
		t.Fatal("a question of another session was cancelled")
	}
	h.send(`{"jsonrpc":"2.0","id":2,"result":{"action":"accept","content":{"target":"production"}}}`)
	h.sync("after")
}

// TestAgentCancelsAForwardedQuestion: the agent's $/cancel_request for a
// question the editor has is answered by the broker, which withdraws it
// everywhere: the Policy's context ends, the editor gets $/cancel_request
// and its late answer is dropped.
func TestAgentCancelsAForwardedQuestion(t *testing.T) {
	p := newHoldPolicy()
	h := startBroker(t, p)
	req := question("7", "s1")
	h.agentSends(req)
	c := p.next(t)
	c.Forward(nil)
	h.expect(req)
	h.agentSends(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":7}}`)
	h.expectEither(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":7}}`,
		received(`{"jsonrpc":"2.0","id":7,"error":{"code":-32800,"message":"request cancelled by the agent"}}`))
	select {
	case <-c.Context().Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the policy was not told the question ended")
	}
	h.send(`{"jsonrpc":"2.0","id":7,"result":{"action":"accept","content":{"target":"staging"}}}`)
	h.sync("after")
}

// TestElicitationCompleteIsRelayedAndSignalled: elicitation/complete
// reaches the editor as sent, and tells the URL-mode question it names,
// and no other, that it is complete, without answering it.
func TestElicitationCompleteIsRelayedAndSignalled(t *testing.T) {
	p := newHoldPolicy()
	h := startBroker(t, p)
	h.agentSends(urlQuestion("1", "s1", "el-1"))
	named := p.next(t)
	h.agentSends(urlQuestion("2", "s1", "el-2"))
	other := p.next(t)
	complete := `{"jsonrpc":"2.0","method":"elicitation/complete","params":{"elicitationId":"el-1","_meta":{"x":1}}}`
	h.agentSends(complete)
	h.expect(complete)
	select {
	case <-named.ElicitationCompleted():
	case <-time.After(10 * time.Second):
		t.Fatal("the question named was not told it is complete")
	}
	select {
	case <-other.ElicitationCompleted():
		t.Fatal("another question was told it is complete")
	default:
	}
	if named.Context().Err() != nil {
		t.Fatal("the completion answered the question")
	}
	named.RespondAs(map[string]string{"action": "accept"}, nil)
	h.expectAgentReceived(`{"jsonrpc":"2.0","id":1,"result":{"action":"accept"}}`)
}

// TestInitializeRewrite: the Initialize hook's request is what the agent
// gets, and without one (or when it returns nil) the editor's bytes are.
func TestInitializeRewrite(t *testing.T) {
	for _, rewrite := range []bool{false, true} {
		t.Run(fmt.Sprint(rewrite), func(t *testing.T) {
			exe := startBrokerWith(t, newHoldPolicy(), func(m *jsonrpc.Message) ([]byte, string) {
				if !rewrite {
					return nil, ""
				}
				return bytes.Replace(m.Raw, []byte(`"clientCapabilities":{}`), []byte(`"clientCapabilities":{"x":1}`), 1), "added x"
			})
			init := `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}`
			exe.send(init)
			if rewrite {
				exe.expectAgentReceived(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{"x":1}}}`)
			} else {
				exe.expectAgentReceived(init)
			}
		})
	}
}
