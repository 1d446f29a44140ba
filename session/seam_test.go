package session

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/acp-broker/acp-broker/jsonrpc"
)

// holdPolicy holds every intercepted call and hands it to the test.
type holdPolicy struct{ calls chan *Call }

func newHoldPolicy() *holdPolicy { return &holdPolicy{calls: make(chan *Call, 16)} }

func (p *holdPolicy) Intercept(c *Call) { p.calls <- c }

func (p *holdPolicy) next(t *testing.T) *Call {
	t.Helper()
	select {
	case c := <-p.calls:
		return c
	case <-time.After(10 * time.Second):
		t.Fatal("timed out waiting for an intercepted call")
	}
	return nil
}

func permissionRequest(id, sessionID, toolCallID string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"session/request_permission","params":{"sessionId":%q,"toolCall":{"toolCallId":%q},"options":[{"optionId":"allow-once","name":"Allow","kind":"allow_once"},{"optionId":"reject","name":"Reject","kind":"reject_once"}]}}`, id, sessionID, toolCallID)
}

func TestHeldRequestIsAnsweredOnceWithTheAgentsID(t *testing.T) {
	p := newHoldPolicy()
	h := startBroker(t, p)
	req := permissionRequest(`"perm-7"`, "s1", "call_1")
	h.agentSends(req)
	c := p.next(t)
	if string(c.ID) != `"perm-7"` || c.Method != "session/request_permission" || string(c.Raw()) != req {
		t.Fatalf("call = %s %s %s", c.ID, c.Method, c.Raw())
	}
	if !c.SelectOption("allow-once") {
		t.Fatal("first answer refused")
	}
	if c.SelectOption("reject") || c.RespondError(1, "again") || c.Forward(nil) {
		t.Fatal("a second answer was accepted")
	}
	select {
	case <-c.Context().Done():
	default:
		t.Fatal("the call's context is still live after its answer")
	}
	h.expectAgentReceived(`{"jsonrpc":"2.0","id":"perm-7","result":{"outcome":{"outcome":"selected","optionId":"allow-once"}}}`)
	// The editor never saw the held request, and the agent got nothing more.
	h.sync("after")
}

func TestHeldPermissionRequestsAreCancelledWithTheirSession(t *testing.T) {
	p := newHoldPolicy()
	h := startBroker(t, p)
	h.agentSends(permissionRequest("1", "s1", "a"))
	h.agentSends(permissionRequest("2", "s2", "b"))
	h.agentSends(permissionRequest("3", "s1", "c"))
	c1, c2, c3 := p.next(t), p.next(t), p.next(t)

	cancel := `{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s1"}}`
	h.send(cancel)
	h.expectAgentReceived(cancel)
	got := map[string]bool{h.next(): true, h.next(): true}
	for _, id := range []string{"1", "3"} {
		want := received(`{"jsonrpc":"2.0","id":` + id + `,"result":{"outcome":{"outcome":"cancelled"}}}`)
		if !got[want] {
			t.Errorf("agent did not receive the cancelled outcome for request %s; got %v", id, got)
		}
	}
	for _, c := range []*Call{c1, c3} {
		if c.Context().Err() == nil {
			t.Errorf("call %s still live after session/cancel", c.ID)
		}
	}
	if c2.Context().Err() != nil {
		t.Fatal("a call of another session was cancelled")
	}
	c2.SelectOption("allow-once")
	h.expectAgentReceived(`{"jsonrpc":"2.0","id":2,"result":{"outcome":{"outcome":"selected","optionId":"allow-once"}}}`)
}

// TestForwardedRequestsAreCancelledByTheBroker: the broker does not wait for
// the editor to answer a forwarded request cancelled after session/cancel:
// it answers it itself, withdraws the editor's prompt, and drops the
// editor's own answer, so that nothing else can answer it meanwhile.
func TestForwardedRequestsAreCancelledByTheBroker(t *testing.T) {
	p := newHoldPolicy()
	h := startBroker(t, p)
	req := permissionRequest("4", "s1", "a")
	h.agentSends(req)
	c := p.next(t)
	c.Forward(nil)
	h.expect(req)
	cancel := `{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s1"}}`
	h.send(cancel)
	// No $/cancel_request: session/cancel itself withdrew the prompt.
	h.expectAgentReceived(cancel)
	h.expectAgentReceived(`{"jsonrpc":"2.0","id":4,"result":{"outcome":{"outcome":"cancelled"}}}`)
	if c.SelectOption("allow-once") {
		t.Fatal("answered a call after its session was cancelled")
	}
	if !errors.Is(context.Cause(c.Context()), ErrSessionCancelled) {
		t.Fatalf("cause = %v", context.Cause(c.Context()))
	}
	h.send(`{"jsonrpc":"2.0","id":4,"result":{"outcome":{"outcome":"cancelled"}},"_meta":{"by":"editor"}}`)
	h.sync("after")
}

func TestAgentCancelsAHeldRequest(t *testing.T) {
	p := newHoldPolicy()
	h := startBroker(t, p)
	h.agentSends(permissionRequest("5", "s1", "a"))
	c := p.next(t)
	h.agentSends(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":5}}`)
	h.expectAgentReceived(`{"jsonrpc":"2.0","id":5,"error":{"code":-32800,"message":"request cancelled by the agent"}}`)
	select {
	case <-c.Context().Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the policy was not told the call ended")
	}
	if c.SelectOption("allow-once") {
		t.Fatal("answered a call the agent had cancelled")
	}
	// Neither the request nor its cancellation reached the editor.
	h.sync("after")
}

func TestAgentCancelOfAForwardedRequestIsRelayed(t *testing.T) {
	p := newHoldPolicy()
	h := startBroker(t, p)
	req := permissionRequest("6", "s1", "a")
	h.agentSends(req)
	p.next(t).Forward(nil)
	h.expect(req)
	cancel := `{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":6}}`
	h.agentSends(cancel)
	h.expect(cancel)
	reply := `{"jsonrpc":"2.0","id":6,"error":{"code":-32800,"message":"cancelled"}}`
	h.send(reply)
	h.expectAgentReceived(reply)
}

func TestBrokerAnswerWithdrawsTheEditorsPrompt(t *testing.T) {
	p := newHoldPolicy()
	h := startBroker(t, p)
	req := permissionRequest("8", "s1", "a")
	h.agentSends(req)
	c := p.next(t)
	c.Forward(nil)
	h.expect(req)
	c.SelectOption("reject")
	h.expectEither(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":8}}`,
		received(`{"jsonrpc":"2.0","id":8,"result":{"outcome":{"outcome":"selected","optionId":"reject"}}}`))
	// The editor's late answer is dropped: the agent hears nothing of it.
	h.send(`{"jsonrpc":"2.0","id":8,"result":{"outcome":{"outcome":"selected","optionId":"allow-once"}}}`)
	h.sync("after")
}

func TestEditorAnswerToAForwardedRequestIsRelayedExactly(t *testing.T) {
	p := newHoldPolicy()
	h := startBroker(t, p)
	req := permissionRequest(`"x"`, "s1", "a")
	h.agentSends(req)
	c := p.next(t)
	seen := make(chan string, 1)
	c.Forward(func(m *jsonrpc.Message) { seen <- string(m.Result) })
	h.expect(req)
	answer := `{"result": {"outcome":{"optionId":"allow-once","outcome":"selected"}}, "id":"x","jsonrpc":"2.0"}`
	h.send(answer)
	h.expectAgentReceived(answer)
	if got := <-seen; got != `{"outcome":{"optionId":"allow-once","outcome":"selected"}}` {
		t.Fatalf("policy saw %s", got)
	}
	if c.SelectOption("reject") {
		t.Fatal("the broker answered after the editor did")
	}
	h.sync("after")
}

func TestEditorCannotAnswerARequestItWasNeverSent(t *testing.T) {
	p := newHoldPolicy()
	h := startBroker(t, p)
	h.agentSends(permissionRequest("9", "s1", "a"))
	c := p.next(t)
	h.send(`{"jsonrpc":"2.0","id":9,"result":{"outcome":{"outcome":"selected","optionId":"allow-once"}}}`)
	h.sync("after")
	if c.Context().Err() != nil {
		t.Fatal("a made-up editor answer ended the call")
	}
	c.SelectOption("reject")
	h.expectAgentReceived(`{"jsonrpc":"2.0","id":9,"result":{"outcome":{"outcome":"selected","optionId":"reject"}}}`)
}

func TestBrokersOwnRequestsUseTheirOwnIDs(t *testing.T) {
	p := newHoldPolicy()
	h := startBroker(t, p)
	h.agentSends(permissionRequest("10", "s1", "a"))
	c := p.next(t)
	type result struct {
		m   *jsonrpc.Message
		err error
	}
	done := make(chan result, 1)
	go func() {
		m, err := c.RequestEditor(context.Background(), "_acp_broker/ask", map[string]string{"q": "ok?"})
		done <- result{m, err}
	}()
	h.expect(`{"id":"acp-broker-1","jsonrpc":"2.0","method":"_acp_broker/ask","params":{"q":"ok?"}}`)
	h.send(`{"jsonrpc":"2.0","id":"acp-broker-1","result":{"yes":true}}`)
	r := <-done
	if r.err != nil || string(r.m.Result) != `{"yes":true}` {
		t.Fatalf("RequestEditor = %v, %v", r.m, r.err)
	}
	// The answer was the broker's: the agent never saw it.
	h.sync("after")
	c.SelectOption("allow-once")
}

func TestAgentCannotUseTheBrokersIDs(t *testing.T) {
	h := startBroker(t, newHoldPolicy())
	h.agentSends(`{"jsonrpc":"2.0","id":"acp-broker-1","method":"fs/read_text_file","params":{"sessionId":"s1","path":"/etc/hosts"}}`)
	h.expectAgentReceived(`{"jsonrpc":"2.0","id":"acp-broker-1","error":{"code":-32600,"message":"request ids starting with \"acp-broker-\" are reserved by acp-broker"}}`)
	h.sync("after")
}

func TestInterceptionKeepsMessageOrder(t *testing.T) {
	h := startBroker(t, forwardPolicy{})
	lines := []string{
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"tool_call","toolCallId":"a","kind":"execute"}}}`,
		permissionRequest("11", "s1", "a"),
		`{"jsonrpc":"2.0","id":12,"method":"fs/write_text_file","params":{"sessionId":"s1","path":"/tmp/x","content":"y"}}`,
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi"}}}}`,
	}
	for _, l := range lines {
		h.agentSends(l)
	}
	for _, l := range lines {
		h.expect(l)
	}
}

func TestPermissionRequestSeesTheMergedToolCall(t *testing.T) {
	p := newHoldPolicy()
	h := startBroker(t, p)
	h.send(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/work/repo","additionalDirectories":["/work/lib"],"mcpServers":[]}}`)
	h.next() // the agent's report of it
	h.agentSends(`{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s1"}}`)
	h.expect(`{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s1"}}`)
	h.agentSends(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"tool_call","toolCallId":"call_1","title":"Bash","kind":"execute","rawInput":{"command":"git push"},"_meta":{"claudeCode":{"toolName":"Bash"}}}}}`)
	h.agentSends(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"tool_call_update","toolCallId":"call_1","title":"git push"}}}`)
	h.agentSends(permissionRequest("2", "s1", "call_1"))
	h.next()
	h.next()
	c := p.next(t)
	if c.Session.Cwd != "/work/repo" || len(c.Session.AdditionalDirectories) != 1 {
		t.Errorf("session = %+v", c.Session)
	}
	tc := c.ToolCall
	if tc == nil || tc.String("kind") != "execute" || tc.String("title") != "git push" || !strings.Contains(string(tc.Fields["rawInput"]), "git push") || tc.Fields["_meta"] == nil {
		t.Fatalf("merged tool call = %+v", tc)
	}
	c.Forward(nil)
	h.next()
}

type forwardPolicy struct{}

func (forwardPolicy) Intercept(c *Call) { c.Forward(nil) }

// TestEditorAnswersToNoWaitingRequestOfTheBrokerAreDropped: a response with
// an id in the broker's namespace that no request of the broker's waits for
// (it gave up on it, or never sent it) never reaches the agent.
func TestEditorAnswersToNoWaitingRequestOfTheBrokerAreDropped(t *testing.T) {
	h := startBroker(t, newHoldPolicy())
	h.send(`{"jsonrpc":"2.0","id":"acp-broker-99","result":{"outcome":{"outcome":"selected","optionId":"allow-once"}}}`)
	h.sync("after") // the agent would have echoed it first
}

// TestEditorAnswersTwice: the second answer to one request never reaches
// the agent, however late.
func TestEditorAnswersTwice(t *testing.T) {
	p := newHoldPolicy()
	h := startBroker(t, p)
	req := permissionRequest("7", "s1", "a")
	h.agentSends(req)
	p.next(t).Forward(nil)
	h.expect(req)
	first := `{"jsonrpc":"2.0","id":7,"result":{"outcome":{"outcome":"selected","optionId":"reject"}}}`
	h.send(first)
	h.expectAgentReceived(first)
	h.send(`{"jsonrpc":"2.0","id":7,"result":{"outcome":{"outcome":"selected","optionId":"allow-once"}}}`)
	h.sync("after")
}

// TestReusedIDOfAWithdrawnPromptGoesUnderAFreshID: a terminal/create that
// reuses the id of a permission request the broker answered and withdrew
// reaches the editor under an id of the broker's, and the editor's answer to
// that id reaches the agent under the agent's; the late answer to the old
// prompt is dropped.
func TestReusedIDOfAWithdrawnPromptGoesUnderAFreshID(t *testing.T) {
	p := newHoldPolicy()
	h := startBroker(t, p)
	req := permissionRequest("8", "s1", "a")
	h.agentSends(req)
	first := p.next(t)
	first.Forward(nil)
	h.expect(req)
	first.RespondCancelled()
	// The withdrawal and the agent's report of its answer race to the editor.
	got := map[string]bool{h.next(): true, h.next(): true}
	if !got[`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":8}}`] || !got[received(`{"jsonrpc":"2.0","id":8,"result":{"outcome":{"outcome":"cancelled"}}}`)] {
		t.Fatalf("editor got %v", got)
	}

	h.agentSends(`{"jsonrpc":"2.0","id":8,"method":"terminal/create","params":{"sessionId":"s1","command":"ls"}}`)
	p.next(t).Forward(nil)
	h.expect(`{"jsonrpc":"2.0","id":"acp-broker-1","method":"terminal/create","params":{"sessionId":"s1","command":"ls"}}`)
	h.send(`{"jsonrpc":"2.0","id":8,"result":{"outcome":{"outcome":"selected","optionId":"allow-once"}}}`) // late, for the old prompt
	h.send(`{"jsonrpc":"2.0","id":"acp-broker-1","result":{"terminalId":"t1"}}`)
	h.expectAgentReceived(`{"jsonrpc":"2.0","id":8,"result":{"terminalId":"t1"}}`)
	h.sync("after")
}
