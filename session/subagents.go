package session

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/acp-broker/acp-broker/jsonrpc"
)

// Subagents' sessions (ACP's unstable subagents, baseline in v2): an agent
// that runs a subagent announces a child session with a session/update
// {sessionUpdate: "subagent_update", sessionId: CHILD, cwd?,
// additionalDirectories?, ...} on the parent, and the child's own traffic
// (its updates, its permission requests) then names the child. The editor
// never opens a child, so without its announcement a child is an unknown
// session, whose requests are asked and whose writes and terminals are
// refused.
//
// A child is governed as part of its root, the session the editor opened
// that it descends from: the root's rules, project, mode and remembered
// answers, whatever the agent says of the child. Only where the child works
// is the child's own: its cwd, when inside the root's directories, is what
// `./` means for it; anywhere else it is a place of its own that a rule must
// allow, as a request's rawInput.cwd is. So an announcement can give a
// child no more than its root already has.

// MaxSubagentSessions caps the children tracked at once; the least recently
// used goes first (its requests are then asked, as an unknown session's).
const MaxSubagentSessions = 4096

// maxSubagentDepth bounds the chain from a child up to its root.
const maxSubagentDepth = 64

// subagent is what the announcements said of a subagent's session. A field
// left unset inherits the parent's effective value, as ACP specifies.
type subagent struct {
	parent string
	cwd    *string   // nil: the parent's
	dirs   *[]string // nil: the parent's
	// unreadable says why the broker could not read an announcement of
	// it: nothing of the child is decided from then on.
	unreadable string
}

// subagentsAdvertised reports whether the editor takes subagents' sessions:
// it advertised clientCapabilities.subagents (v1), or the connection speaks
// ACP v2 or later, where they are baseline. The caller holds t.mu.
func (t *tracker) subagentsAdvertised() bool {
	if caps := t.agent.ClientCapabilities; caps != nil {
		if raw, ok := jsonrpc.Field(caps, "subagents"); ok && len(raw) > 0 && raw[0] == '{' {
			return true
		}
	}
	v, err := strconv.ParseFloat(string(t.agent.ProtocolVersion), 64)
	return err == nil && v >= 2
}

// subagentUpdate follows a subagent_update the agent sent on session
// parentID. It takes a child only when the announcing session is one the
// editor opened or a child of one, and a child only once: later updates
// may move it (cwd, additionalDirectories), never give it another parent,
// and no session the editor opened becomes anyone's child.
func (t *tracker) subagentUpdate(parentID string, upd json.RawMessage) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.subagentsAdvertised() {
		return
	}
	if _, ok := t.rootOf(parentID); !ok {
		return // announced by a session nobody opened
	}
	members, err := jsonrpc.ExactMembers(upd, "sessionUpdate", "sessionId", "cwd", "additionalDirectories")
	var childID string
	if err == nil {
		raw, ok := members["sessionId"]
		if childID, ok = jsonrpc.Unquote(raw); !ok || childID == "" {
			return // names no child
		}
	} else {
		// A child it may name is not one the broker can read: if it
		// knows one it names, it decides nothing of it any more.
		if names := jsonrpc.Namesakes(upd, "sessionId"); names != nil {
			for _, id := range names[0] {
				if s, ok := jsonrpc.Unquote(id.Value); ok {
					if c := t.children[s]; c != nil && c.child.parent == parentID {
						c.child.unreadable = "an announcement of it repeats a member or spells one in another case: " + err.Error()
					}
				}
			}
		}
		return
	}
	if _, opened := t.opened[childID]; opened || childID == parentID || t.isAncestor(childID, parentID) {
		return
	}
	s, known := t.children[childID]
	if known && s.child.parent != parentID {
		return // the parent owns the child; another session cannot take it
	}
	if !known {
		if len(t.children) >= MaxSubagentSessions {
			evictOldest(t.children)
		}
		t.clock++
		s = t.unknown[childID]
		delete(t.unknown, childID)
		if s == nil {
			s = &sessionState{toolCalls: make(map[string]*ToolCall)}
		}
		// What it announced before is kept; if some of it was dropped,
		// which is not known, no untracked tool call can be checked.
		s.overflowed = s.overflowed || s.dropped
		s.info = Info{ID: childID}
		s.child = &subagent{parent: parentID}
		s.lastUsed = t.clock
		t.children[childID] = s
	}
	c := s.child
	if raw, ok := members["cwd"]; ok {
		if jsonrpc.IsNull(raw) {
			c.cwd = nil // back to the parent's
		} else if dir, ok := jsonrpc.Unquote(raw); ok && filepath.IsAbs(dir) && !strings.ContainsRune(dir, 0) {
			dir = filepath.Clean(dir)
			c.cwd = &dir
		} else {
			c.unreadable = fmt.Sprintf("its cwd %s is not an absolute path", brief(raw))
		}
	}
	if raw, ok := members["additionalDirectories"]; ok {
		var dirs []string
		switch {
		case jsonrpc.IsNull(raw):
			c.dirs = nil
		case json.Unmarshal(raw, &dirs) == nil && !slices.ContainsFunc(dirs, func(d string) bool { return !filepath.IsAbs(d) || strings.ContainsRune(d, 0) }):
			for i := range dirs {
				dirs[i] = filepath.Clean(dirs[i])
			}
			c.dirs = &dirs
		default:
			c.unreadable = fmt.Sprintf("its additionalDirectories %s are not absolute paths", brief(raw))
		}
	}
}

// rootOf returns the session the editor opened that a session is or
// descends from. The caller holds t.mu.
func (t *tracker) rootOf(id string) (*sessionState, bool) {
	for range maxSubagentDepth {
		if s, ok := t.opened[id]; ok {
			return s, true
		}
		c, ok := t.children[id]
		if !ok {
			return nil, false
		}
		id = c.child.parent
	}
	return nil, false
}

// isAncestor reports whether id is parentID or one of its ancestors. The
// caller holds t.mu.
func (t *tracker) isAncestor(id, parentID string) bool {
	for range maxSubagentDepth {
		if parentID == id {
			return true
		}
		c, ok := t.children[parentID]
		if !ok {
			return false
		}
		parentID = c.child.parent
	}
	return true
}

// childInfo is what is known of a child session: its root's directories
// and servers, with where the child itself works. A child whose chain no
// longer reaches an opened session (its root closed, a link evicted) is
// unknown. The caller holds t.mu.
func (t *tracker) childInfo(s *sessionState) Info {
	info := Info{ID: s.info.ID, Parent: s.child.parent}
	var cwd *string
	var dirs *[]string
	unreadable := ""
	id := s.info.ID
	for range maxSubagentDepth {
		if root, ok := t.opened[id]; ok {
			info.Root = root.info.ID
			info.Cwd = root.info.Cwd
			info.AdditionalDirectories = slices.Clone(root.info.AdditionalDirectories)
			info.MCPServers = slices.Clone(root.info.MCPServers)
			info.WorkDir, info.WorkDirs = info.Cwd, info.AdditionalDirectories
			if cwd != nil {
				info.WorkDir = *cwd
			}
			if dirs != nil {
				info.WorkDirs = slices.Clone(*dirs)
			}
			info.Unreadable = unreadable
			if unreadable == "" {
				info.Unreadable = root.info.Unreadable
			}
			// A subagent works in its parent's mode: the agent reports and
			// switches modes of the sessions the editor opened only.
			info.Agent = t.agentNameLocked()
			info.AgentMode, info.ModeConfigID = root.mode.id, root.mode.configID
			return info
		}
		c, ok := t.children[id]
		if !ok {
			break
		}
		// The nearest ancestor that says where a child works wins.
		if cwd == nil {
			cwd = c.child.cwd
		}
		if dirs == nil {
			dirs = c.child.dirs
		}
		if unreadable == "" && c.child.unreadable != "" {
			unreadable = fmt.Sprintf("the agent's announcement of subagent session %q: %s", id, c.child.unreadable)
		}
		id = c.child.parent
	}
	return Info{ID: s.info.ID}
}

// descendants returns the children of a session, their children and so
// on. The caller holds t.mu.
func (t *tracker) descendants(id string) []string {
	var out []string
	frontier := []string{id}
	for depth := 0; len(frontier) > 0 && depth < maxSubagentDepth; depth++ {
		var next []string
		for childID, s := range t.children {
			if slices.Contains(frontier, s.child.parent) && !slices.Contains(out, childID) {
				next = append(next, childID)
			}
		}
		out = append(out, next...)
		frontier = next
	}
	return out
}

// endChildren forgets a closed session's children and theirs. The caller
// holds t.mu.
func (t *tracker) endChildren(id string) {
	for _, childID := range t.descendants(id) {
		delete(t.children, childID)
	}
}

// descendantsOf returns the subagents' sessions a session has, directly or
// through other children.
func (t *tracker) descendantsOf(id string) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.descendants(id)
}
