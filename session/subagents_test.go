package session

import (
	"fmt"
	"testing"
)

// subagentTracker has session s1 opened in /repo by an editor that
// advertised subagents.
func subagentTracker(t *testing.T) *tracker {
	t.Helper()
	tr := newTracker()
	tr.editorRequest(msg(t, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{"subagents":{}}}}`))
	tr.agentResponse(msg(t, `{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1}}`))
	tr.editorRequest(msg(t, `{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/repo","additionalDirectories":["/lib"],"mcpServers":[]}}`))
	tr.agentResponse(msg(t, `{"jsonrpc":"2.0","id":2,"result":{"sessionId":"s1"}}`))
	return tr
}

func announce(tr *tracker, parent, child, fields string) {
	if fields != "" {
		fields = "," + fields
	}
	tr.update(update(parent, `{"sessionUpdate":"subagent_update","sessionId":"`+child+`"`+fields+`}`))
}

func TestSubagentInfoInheritsAndOverrides(t *testing.T) {
	tr := subagentTracker(t)
	announce(tr, "s1", "c1", `"title":"x"`)
	announce(tr, "c1", "g1", `"cwd":"/repo/wt"`)
	announce(tr, "g1", "gg1", `"additionalDirectories":["/repo/other"]`)
	c1, g1, gg1 := tr.info("c1"), tr.info("g1"), tr.info("gg1")
	if !c1.Known() || c1.Opened || c1.Root != "s1" || c1.Parent != "s1" || c1.Cwd != "/repo" || c1.WorkDir != "/repo" || len(c1.WorkDirs) != 1 {
		t.Errorf("c1 = %+v", c1)
	}
	if g1.Root != "s1" || g1.Parent != "c1" || g1.Cwd != "/repo" || g1.WorkDir != "/repo/wt" || g1.RulesSession() != "s1" {
		t.Errorf("g1 = %+v", g1)
	}
	if gg1.WorkDir != "/repo/wt" || len(gg1.WorkDirs) != 1 || gg1.WorkDirs[0] != "/repo/other" {
		t.Errorf("gg1 = %+v", gg1)
	}
	if d := tr.descendantsOf("s1"); len(d) != 3 {
		t.Errorf("descendants of s1 = %v", d)
	}
	// cwd null is the parent's again; an unreadable one spoils the child.
	announce(tr, "c1", "g1", `"cwd":null`)
	if g1 := tr.info("g1"); g1.WorkDir != "/repo" {
		t.Errorf("after cwd null: %+v", g1)
	}
	announce(tr, "c1", "g1", `"cwd":"wt"`)
	if g1 := tr.info("g1"); g1.Unreadable == "" || tr.info("gg1").Unreadable == "" {
		t.Errorf("a relative cwd leaves g1 readable: %+v", g1)
	}
}

func TestSubagentOwnershipAndBounds(t *testing.T) {
	tr := subagentTracker(t)
	tr.open(Info{ID: "s2", Opened: true, Cwd: "/other"})
	announce(tr, "s1", "c1", "")
	announce(tr, "s2", "c1", "")     // another parent: ignored
	announce(tr, "c1", "s1", "")     // an opened session: ignored
	announce(tr, "c1", "c1", "")     // itself: ignored
	announce(tr, "nobody", "c9", "") // an unopened parent: ignored
	if c1 := tr.info("c1"); c1.Parent != "s1" || tr.info("s1").Parent != "" || tr.info("c9").Known() {
		t.Errorf("c1 = %+v, s1 = %+v, c9 = %+v", c1, tr.info("s1"), tr.info("c9"))
	}
	announce(tr, "c1", "g1", "")
	announce(tr, "g1", "c1", "") // a cycle: ignored
	if tr.info("c1").Parent != "s1" {
		t.Errorf("c1 was re-parented: %+v", tr.info("c1"))
	}
	// A flood of announcements pushes out only children, and a child whose
	// parent went is unknown.
	for i := range MaxSubagentSessions + 10 {
		announce(tr, "s2", fmt.Sprintf("flood-%d", i), "")
	}
	if len(tr.children) > MaxSubagentSessions {
		t.Errorf("%d children tracked", len(tr.children))
	}
	if !tr.info("s1").Opened || tr.info("g1").Known() {
		t.Errorf("s1 = %+v, g1 = %+v", tr.info("s1"), tr.info("g1"))
	}
	// Closing a parent ends its children.
	announce(tr, "s1", "c2", "")
	announce(tr, "c2", "g2", "")
	tr.editorRequest(msg(t, `{"jsonrpc":"2.0","id":9,"method":"session/close","params":{"sessionId":"s1"}}`))
	tr.agentResponse(msg(t, `{"jsonrpc":"2.0","id":9,"result":{}}`))
	if tr.info("c2").Known() || tr.info("g2").Known() {
		t.Error("children of a closed session are still known")
	}
}

func TestSubagentsNeedTheCapability(t *testing.T) {
	tr := newTracker()
	tr.open(Info{ID: "s1", Opened: true, Cwd: "/repo"})
	announce(tr, "s1", "c1", "")
	if tr.info("c1").Known() {
		t.Error("a child announced to an editor that did not advertise subagents")
	}
	// ACP v2: subagents are baseline.
	tr.editorRequest(msg(t, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":2,"info":{"name":"x","version":"1"}}}`))
	tr.agentResponse(msg(t, `{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":2}}`))
	announce(tr, "s1", "c1", "")
	if !tr.info("c1").Known() {
		t.Error("a child of a v2 connection is unknown")
	}
}
