package mcp

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/acp-broker/acp-broker/rules"
)

// maxSessionsPerTool bounds the session ids kept with each tool.
const maxSessionsPerTool = 16

// Snapshot is what a server said of one tool at one time: the annotations as
// sent (keys sorted) and a digest of the description. The description itself
// is not kept: it can be long, and only whether it changed matters.
type Snapshot struct {
	Annotations json.RawMessage `json:"annotations,omitempty"`
	Description string          `json:"description_sha256"`
	At          time.Time       `json:"at"`
}

// Record is the catalog's entry for one tool of one server.
type Record struct {
	Pinned Snapshot `json:"pinned"`
	Seen   Snapshot `json:"seen"`
	// Sessions are the ACP sessions (newest last) in which the tool was
	// listed.
	Sessions []string `json:"sessions,omitempty"`
}

// Changed says how the tool's last listing differs from the pinned one, or
// "" when it does not.
func (r *Record) Changed() string { return diff(r.Pinned, r.Seen) }

// ReadOnly reports whether the pinned annotations say read-only and not
// destructive.
func (r *Record) ReadOnly() bool { return readOnly(r.Pinned.Annotations) }

type catalogFile struct {
	Version int                           `json:"version"`
	Servers map[string]map[string]*Record `json:"servers"`
}

// Catalog is the pinned annotations of every MCP tool the user's brokers
// have seen, in $XDG_STATE_HOME/acp-broker/mcp-tools.json, and what this
// broker's proxies reported while it runs.
//
// The file is shared by every broker of the user, like the remembered
// answers: writers lock it and replace it whole. A tool is pinned the first
// time any broker sees it; later listings are compared with the pin.
type Catalog struct {
	Path string

	mu sync.Mutex
	// live holds the tools listed to this broker, by server and tool. Only
	// these give hints: annotations a server gave in an earlier run say
	// nothing of what it is now.
	live map[string]map[string]*Record
	// conflicts says, by "server/tool", why a tool's hints cannot be relied
	// on whatever its pin says: listed twice, differently, in one list; the
	// listing could not be recorded; or the server said its tools changed
	// and has not listed them since.
	conflicts map[string]string
	// listed holds, by session and server (listedKey) and tool, what each
	// tool was first listed as in the session since the server last said
	// its tools changed; relisted says, by listedKey and "/tool", how a
	// later listing differed from it. A server that lists a tool one way and
	// then another (on two pages of one listing, or in two listings) without
	// saying its tools changed has shown the session's agent both: neither
	// may relax the tool in that session until the server says its tools
	// changed and they are listed anew.
	listed   map[string]map[string]Snapshot
	relisted map[string]string
	stamp    rules.FileStamp
	// proxied says, by ACP session, which of its servers this broker
	// proxies: only these take hints (see HintsFor); attachedOrder bounds it.
	proxied       map[string]map[string]bool
	attachedOrder []string
}

// maxAttachedSessions bounds the sessions whose proxied servers the catalog
// remembers; the oldest go first, and their tools are then only asked.
const maxAttachedSessions = 4096

// CatalogIn returns the catalog of a state directory.
func CatalogIn(stateDir string) *Catalog {
	return &Catalog{Path: filepath.Join(stateDir, "mcp-tools.json")}
}

// Tool is one entry of a tools/list result, as far as the catalog reads it.
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Annotations json.RawMessage `json:"annotations"`
}

// Change is what a report changed in the catalog: a tool pinned for the
// first time, or one whose listing no longer matches its pin.
type Change struct {
	Server, Tool string
	// Stale is set, with no Tool, when the server said its tools changed:
	// none of them is relaxed until it lists them again.
	Stale    bool
	Pinned   bool   // first seen: pinned now
	Differs  string // how it differs from the pin; "" when it does not
	ReadOnly bool   // what the pin says
}

// Observe records the tools a server listed in a session, pins those never
// seen before, and returns what changed. A tool listed again as pinned is not
// a change.
func (c *Catalog) Observe(server, session string, tools []Tool) ([]Change, error) {
	now := time.Now().UTC().Truncate(time.Second)
	snaps := make(map[string]Snapshot, len(tools))
	conflicts := map[string]string{}
	for _, t := range tools {
		s := snapshot(t, now)
		if prev, dup := snaps[t.Name]; dup && diff(prev, s) != "" {
			conflicts[t.Name] = "listed twice, differently: " + diff(prev, s)
		}
		snaps[t.Name] = s
	}
	var changes []Change
	var live map[string]*Record
	err := c.update(func(f *catalogFile) {
		known := f.Servers[server]
		if known == nil {
			known = map[string]*Record{}
			f.Servers[server] = known
		}
		live = map[string]*Record{}
		for _, name := range sortedKeys(snaps) {
			snap := snaps[name]
			r, ok := known[name]
			if !ok {
				r = &Record{Pinned: snap}
				known[name] = r
				changes = append(changes, Change{Server: server, Tool: name, Pinned: true, ReadOnly: readOnly(snap.Annotations)})
			}
			before := r.Changed()
			r.Seen = snap
			if session != "" && !slices.Contains(r.Sessions, session) {
				r.Sessions = append(r.Sessions, session)
				if len(r.Sessions) > maxSessionsPerTool {
					r.Sessions = r.Sessions[len(r.Sessions)-maxSessionsPerTool:]
				}
			}
			if d := r.Changed(); d != "" && d != before {
				changes = append(changes, Change{Server: server, Tool: name, Differs: d, ReadOnly: r.ReadOnly()})
			}
			cp := *r
			live[name] = &cp
		}
	})
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.live == nil {
		c.live, c.conflicts = map[string]map[string]*Record{}, map[string]string{}
	}
	if c.listed == nil {
		c.listed, c.relisted = map[string]map[string]Snapshot{}, map[string]string{}
	}
	lk := listedKey(session, server)
	if c.listed[lk] == nil {
		c.listed[lk] = map[string]Snapshot{}
	}
	for _, t := range tools {
		s := snapshot(t, now)
		first, ok := c.listed[lk][t.Name]
		if !ok {
			c.listed[lk][t.Name] = s
		} else if d := diff(first, s); d != "" {
			c.relisted[lk+"/"+t.Name] = "listed differently since the server last said its tools changed: " + d
		}
	}
	if err != nil {
		// The listing is not pinned: none of these tools may be relaxed.
		for name := range snaps {
			c.conflicts[server+"/"+name] = "the catalog cannot be written: " + err.Error()
		}
		return nil, err
	}
	if c.live[server] == nil {
		c.live[server] = map[string]*Record{}
	}
	for name, r := range live {
		c.live[server][name] = r
		key := server + "/" + name
		delete(c.conflicts, key)
		if why, ok := conflicts[name]; ok {
			c.conflicts[key] = why
		}
	}
	return changes, nil
}

// Stale takes the relaxation from every tool of a server until the server
// lists them again: it said they changed (notifications/tools/list_changed),
// and what they are now is not known.
func (c *Catalog) Stale(server, session string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	// What the session's agent listed while setting up is forgotten too:
	// its agent lists the tools anew.
	for _, lk := range []string{listedKey(session, server), listedKey("", server)} {
		for name := range c.listed[lk] {
			delete(c.relisted, lk+"/"+name)
		}
		delete(c.listed, lk)
	}
	for name := range c.live[server] {
		c.conflicts[server+"/"+name] = "the server said its tools changed and has not listed them since"
	}
}

// Hints tells the rules what this broker's proxies learned of a tool. A
// tool no proxy of this broker listed is unknown, whatever the file says.
func (c *Catalog) Hints(server, tool string) rules.ToolHints {
	c.refreshPins()
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.live[server][tool]
	if !ok {
		return rules.ToolHints{}
	}
	h := rules.ToolHints{Known: true, ReadOnly: r.ReadOnly(), Changed: r.Changed()}
	if why, ok := c.conflicts[server+"/"+tool]; ok {
		h.Changed = why
	}
	return h
}

// Attach records that the broker proxies the server of this name in an ACP
// session.
func (c *Catalog) Attach(session, server string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.proxied == nil {
		c.proxied = map[string]map[string]bool{}
	}
	if c.proxied[session] == nil {
		c.attachedOrder = append(c.attachedOrder, session)
		if len(c.attachedOrder) > maxAttachedSessions {
			delete(c.proxied, c.attachedOrder[0])
			c.attachedOrder = c.attachedOrder[1:]
		}
		c.proxied[session] = map[string]bool{}
	}
	c.proxied[session][server] = true
}

// Detach forgets which servers the broker proxies in an ACP session: its
// set-up is being replaced (session/load, resume), and only the servers of
// the new one may relax its calls.
func (c *Catalog) Detach(session string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.proxied[session] != nil {
		c.proxied[session] = map[string]bool{}
	}
}

// HintsFor returns the Hints of one ACP session: those of the servers the
// broker proxies in that session, and nothing for any other name. The
// catalog knows tools by server name, broker-wide, so without this a
// session whose own "docs" is an unproxied http server (or one the agent
// configured itself) would be relaxed by what another session's proxied
// "docs" said of its tools.
func (c *Catalog) HintsFor(session string) func(server, tool string) rules.ToolHints {
	return func(server, tool string) rules.ToolHints {
		c.mu.Lock()
		ok := c.proxied[session][server]
		c.mu.Unlock()
		if !ok || session == "" {
			return rules.ToolHints{}
		}
		h := c.Hints(server, tool)
		if why := c.relistedIn(session, server, tool); why != "" && h.Known {
			h.Changed = why
		}
		return h
	}
}

// relistedIn says why what the session's agent was shown of a tool cannot
// relax it (listed in two ways, otherwise than pinned, or not at all), or "". Listings made before the session's set-up was answered (session
// "": agents list their tools while they set up) count as the session's,
// whichever session they were for.
func (c *Catalog) relistedIn(session, server, tool string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, lk := range []string{listedKey(session, server), listedKey("", server)} {
		if why, ok := c.relisted[lk+"/"+tool]; ok {
			return why
		}
	}
	early, ok := c.listed[listedKey("", server)][tool]
	later, ok2 := c.listed[listedKey(session, server)][tool]
	if d := diff(early, later); ok && ok2 && d != "" {
		return "listed differently since the server last said its tools changed: " + d
	}
	// The catalog's record is what the server of this name last listed in
	// any session: another session's server of the same name (another
	// project's "docs") may be another server, so only what this session
	// was shown counts.
	own := later
	if !ok2 {
		own = early
	}
	r, known := c.live[server][tool]
	switch {
	case !known:
		return ""
	case !ok && !ok2:
		return "not listed to this session since the server last said its tools changed"
	}
	if d := diff(r.Pinned, own); d != "" {
		return "listed to this session otherwise than pinned: " + d
	}
	return ""
}

// listedKey names a server as one session's proxy lists it.
func listedKey(session, server string) string { return session + "\x00" + server }

// StoredHints is Hints from the file alone, for tools as the brokers' proxies
// last saw them: what `acp-broker rules explain` shows when no broker runs.
func (c *Catalog) StoredHints(server, tool string) rules.ToolHints {
	f, err := c.load()
	if err != nil {
		return rules.ToolHints{}
	}
	r, ok := f.Servers[server][tool]
	if !ok {
		return rules.ToolHints{}
	}
	return rules.ToolHints{Known: true, ReadOnly: r.ReadOnly(), Changed: r.Changed()}
}

// Live returns copies of the tools this broker's proxies listed.
func (c *Catalog) Live() map[string]map[string]Record {
	c.refreshPins()
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]map[string]Record{}
	for s, tools := range c.live {
		out[s] = map[string]Record{}
		for name, r := range tools {
			out[s][name] = *r
		}
	}
	return out
}

// refreshPins takes pins accepted since (acp-broker mcp accept) into the
// live view, when the file changed.
func (c *Catalog) refreshPins() {
	stamp := rules.StampOf(c.Path)
	c.mu.Lock()
	same := stamp == c.stamp || len(c.live) == 0
	c.mu.Unlock()
	if same {
		return
	}
	f, err := c.load()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stamp = stamp
	if err != nil {
		return
	}
	for server, tools := range c.live {
		for name, r := range tools {
			if stored, ok := f.Servers[server][name]; ok {
				r.Pinned = stored.Pinned
			}
		}
	}
}

// Load reads the whole catalog file.
func (c *Catalog) Load() (map[string]map[string]*Record, error) {
	f, err := c.load()
	if err != nil {
		return nil, err
	}
	return f.Servers, nil
}

// Accept pins what a server's tools (all of them when tool is "") last
// listed, so a change the user has checked relaxes again. It returns the
// tools it pinned anew.
func (c *Catalog) Accept(server, tool string) ([]string, error) {
	var accepted []string
	err := c.update(func(f *catalogFile) {
		for name, r := range f.Servers[server] {
			if (tool == "" || tool == name) && r.Changed() != "" {
				r.Pinned = r.Seen
				accepted = append(accepted, name)
			}
		}
	})
	sort.Strings(accepted)
	return accepted, err
}

// Forget removes a server's tools (one of them when tool is not "") from
// the catalog: they are pinned anew when next listed.
func (c *Catalog) Forget(server, tool string) (int, error) {
	n := 0
	err := c.update(func(f *catalogFile) {
		for name := range f.Servers[server] {
			if tool == "" || tool == name {
				delete(f.Servers[server], name)
				n++
			}
		}
		if len(f.Servers[server]) == 0 {
			delete(f.Servers, server)
		}
	})
	return n, err
}

func (c *Catalog) load() (*catalogFile, error) {
	f := &catalogFile{Version: 1, Servers: map[string]map[string]*Record{}}
	data, err := os.ReadFile(c.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return f, nil
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(data, f); err != nil {
		return nil, fmt.Errorf("%s: %w", c.Path, err)
	}
	if f.Servers == nil {
		f.Servers = map[string]map[string]*Record{}
	}
	return f, nil
}

// update changes the file under an exclusive lock and replaces it whole.
func (c *Catalog) update(change func(*catalogFile)) error {
	return rules.WithLock(c.Path, func() error {
		f, err := c.load()
		if err != nil {
			return fmt.Errorf("not writing the MCP tool catalog over a file that cannot be read: %w", err)
		}
		change(f)
		data, err := json.MarshalIndent(f, "", "  ")
		if err != nil {
			return err
		}
		return rules.WriteFileAtomic(c.Path, append(data, '\n'))
	})
}

func snapshot(t Tool, at time.Time) Snapshot {
	sum := sha256.Sum256([]byte(t.Description))
	return Snapshot{Annotations: canonical(t.Annotations), Description: hex.EncodeToString(sum[:]), At: at}
}

// canonical re-encodes annotations with sorted keys, so that two listings
// of the same annotations compare equal whatever their key order; null and
// {} become nothing.
func canonical(raw json.RawMessage) json.RawMessage {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return append(json.RawMessage(nil), raw...) // not JSON: cannot come from a decoded listing
	}
	if m, ok := v.(map[string]any); ok && len(m) == 0 || v == nil {
		return nil
	}
	out, _ := json.Marshal(v) // maps encode with sorted keys
	return out
}

// readOnly reads the MCP hints: readOnlyHint true, and destructiveHint not
// true (absent means destructive only for tools that write, so it does not
// count against a read-only tool).
func readOnly(annotations json.RawMessage) bool {
	var a struct {
		ReadOnly    *bool `json:"readOnlyHint"`
		Destructive *bool `json:"destructiveHint"`
	}
	if json.Unmarshal(annotations, &a) != nil {
		return false
	}
	return a.ReadOnly != nil && *a.ReadOnly && (a.Destructive == nil || !*a.Destructive)
}

// diff describes how b differs from a: each annotation that changed, and
// the description.
func diff(a, b Snapshot) string {
	var out []string
	var am, bm map[string]any
	_ = json.Unmarshal(a.Annotations, &am)
	_ = json.Unmarshal(b.Annotations, &bm)
	if am == nil && len(a.Annotations) > 0 || bm == nil && len(b.Annotations) > 0 {
		// Not objects (never read as read-only): compared whole, in their
		// canonical form, since the file keeps them re-indented.
		if !bytes.Equal(canonical(a.Annotations), canonical(b.Annotations)) {
			out = append(out, "annotations changed")
		}
	} else {
		keys := map[string]bool{}
		for k := range am {
			keys[k] = true
		}
		for k := range bm {
			keys[k] = true
		}
		for _, k := range sortedKeys(keys) {
			av, aok := am[k]
			bv, bok := bm[k]
			if aok == bok && fmt.Sprint(av) == fmt.Sprint(bv) {
				continue
			}
			out = append(out, fmt.Sprintf("%s %s → %s", k, show(av, aok), show(bv, bok)))
		}
	}
	if a.Description != b.Description {
		out = append(out, "description changed")
	}
	return strings.Join(out, ", ")
}

func show(v any, ok bool) string {
	if !ok {
		return "unset"
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
