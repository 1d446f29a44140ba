package rules

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/BurntSushi/toml"
)

// Decision is what a rule or the engine decides about a request.
type Decision string

const (
	Allow Decision = "allow"
	Ask   Decision = "ask"
	Deny  Decision = "deny"
)

// rank orders decisions by strength: deny beats ask beats allow.
func (d Decision) rank() int {
	switch d {
	case Deny:
		return 3
	case Ask:
		return 2
	case Allow:
		return 1
	}
	return 0
}

// Layer is where a rule file comes from. Layers apply together; they differ
// in what they may loosen.
type Layer string

const (
	// Managed is /etc/acp-broker/config.toml, set by an administrator.
	Managed Layer = "managed"
	// User is the user's own config, and any file given with --config.
	User Layer = "user"
	// Project is .acp-broker.toml in the session's working directory and
	// the ones above it up to home or the repository's root (see ProjectFiles). It
	// comes with the repository and may be hostile: its allow rules and its
	// loosening settings apply only once the user trusts its exact content.
	Project Layer = "project"
)

// Kinds are the ACP tool kinds a rule may name.
var Kinds = []string{"read", "edit", "delete", "move", "search", "execute", "think", "fetch", "switch_mode", "other"}

// Modes are the broker's permission modes a rule may be limited to.
var Modes = []string{"default", "accept-edits", "plan", "dont-ask", "bypass"}

// RememberScopes are the values of the remember setting, narrowest first
// (the strictest, which wins among project files).
var RememberScopes = []string{"session", "project", "user"}

// Rule is one [[rule]] table.
type Rule struct {
	ID       string
	Decision Decision
	Reason   string

	Kinds        []string
	Tools        []*glob
	MCP          []*glob // over "server/tool"
	Commands     []*commandPattern
	CommandRegex []*regexp.Regexp
	Paths        []*pathPattern
	URLs         []*urlPattern
	Titles       []*glob
	Modes        []string

	UnlockProtected bool
	Examples        []Example
	Counterexamples []Example

	File  string
	Line  int
	Col   int
	Layer Layer
	// Inactive is set for a project file's allow rule while the file is not
	// trusted: it is listed but never applies.
	Inactive bool
	// Base, for the rule of a project file in a directory above the
	// session's, is that directory: what `./` means in its paths.
	Base string

	// prefixWords, for a remembered `git push *`, is the number of words
	// before the `*`: the command must also stay within what the prefix
	// stands for (prefixCovers).
	prefixWords int
	// toolOnly, for a remembered tool and title, limits the rule to
	// requests that carry no command, path, URL or MCP call.
	toolOnly bool
}

// Where returns file:line for messages, or the entry id of a remembered
// answer.
func (r *Rule) Where() string {
	if r.Layer == Remembered {
		return "remembered:" + r.ID
	}
	return fmt.Sprintf("%s:%d", r.File, r.Line)
}

// context is the context the rule reads a request's paths in: a project
// file's rule anchors ./ at its own file's directory (Base).
func (r *Rule) context(ctx Context) Context {
	if r.Base != "" {
		ctx.Cwd = r.Base
	}
	return ctx
}

// Name returns the rule's id, or its location when it has none.
func (r *Rule) Name() string {
	if r.ID != "" {
		return r.ID
	}
	return r.Where()
}

// hasActionMatcher reports whether the rule names what a request acts on
// (commands, paths, URLs, MCP tools) rather than only what kind of request
// it is.
func (r *Rule) hasActionMatcher() bool {
	return len(r.Commands) > 0 || len(r.CommandRegex) > 0 || len(r.Paths) > 0 || len(r.URLs) > 0 || len(r.MCP) > 0
}

// Example is a request a rule's examples or counterexamples describe: a
// command, or a tool call object as an agent would send it.
type Example struct {
	Text     string                     // the command, for a command example
	ToolCall map[string]json.RawMessage // otherwise
	Line     int
}

// MCPServer is the [mcp.<server>] table.
type MCPServer struct {
	// ReadOnlyTools names the server's tools that get the read-only default.
	ReadOnlyTools []*glob
	// TrustAnnotations lets the server's own readOnlyHint give its tools the
	// read-only default, as long as the annotations stay as first seen.
	TrustAnnotations bool
	// Proxy, when set, says whether the broker stands between the agent and
	// this server (stdio servers only); nil leaves it to [mcp] proxy.
	Proxy *bool
}

// File is one parsed rule file.
type File struct {
	Path  string
	Layer Layer
	// Trusted is false for a project file whose content the user has not
	// trusted.
	Trusted bool

	Mode     string // "" when not set
	Remember string
	ReadOnly string // "allow", "ask" or ""

	Rules []*Rule
	MCP   map[string]*MCPServer
	// MCPProxy is [mcp] proxy: whether stdio MCP servers are proxied; nil
	// when the file does not say.
	MCPProxy *bool

	Ask      *AskConfig // nil when the file has no [ask]
	Channels []ChannelConfig
	// Questions is [questions]; nil when the file has none.
	Questions *QuestionsConfig

	// AgentModes is [agent] modes: "govern", "keep" or "" when not set;
	// AllowModes is [agent] allow_modes (see agentmodes.go).
	AgentModes string
	AllowModes []string

	// Ignored says, one warning each, what a project file set that a
	// project may not set ([ask], [[channel]], [questions], unlock_protected, the MCP
	// proxy): such settings are skipped, never an error, since a file that
	// comes with a repository must not stop the broker.
	Ignored []string
}

// ConfigError is a problem in a rule file, with where it is and a hint.
type ConfigError struct {
	File string
	Line int
	Col  int
	Msg  string
	Hint string
}

func (e *ConfigError) Error() string {
	if e.Line == 0 {
		return fmt.Sprintf("%s: %s", e.File, e.Msg)
	}
	return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Line, e.Col, e.Msg)
}

var topKeys = []string{"mode", "remember", "read_only", "rule", "mcp", "ask", "channel", "agent", "questions"}

var ruleKeys = []string{
	"id", "decision", "reason", "kind", "tool", "mcp", "command", "command_regex", "path", "url",
	"title", "modes", "unlock_protected", "examples", "counterexamples",
}

var mcpKeys = []string{"read_only_tools", "trust_annotations", "proxy"}

// ParseFile reads one rule file strictly: an unknown key, a wrong type, a
// bad glob or regex stops with the file, line and column and a hint. No rule
// is ever skipped.
func ParseFile(path string, layer Layer) (*File, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, layer, string(src))
}

// Parse is ParseFile on content already read.
func Parse(path string, layer Layer, src string) (*File, error) {
	d := &decoder{file: &File{Path: path, Layer: layer, Trusted: layer != Project, MCP: map[string]*MCPServer{}}, loc: newLocator(src)}
	var top map[string]toml.Primitive
	md, err := toml.Decode(src, &top)
	if err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			return nil, &ConfigError{File: path, Line: pe.Position.Line, Col: max(pe.Position.Col, 1), Msg: pe.Message, Hint: syntaxHint(pe)}
		}
		return nil, &ConfigError{File: path, Msg: err.Error()}
	}
	d.md = md
	keys := make([]string, 0, len(top))
	for k := range top {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return d.loc.topKey(keys[i]).line < d.loc.topKey(keys[j]).line })
	for _, k := range keys {
		prim := top[k]
		at := d.loc.topKey(k)
		switch k {
		case "mode":
			d.file.Mode, err = d.oneOf(prim, at, k, Modes)
		case "remember":
			d.file.Remember, err = d.oneOf(prim, at, k, RememberScopes)
		case "read_only":
			d.file.ReadOnly, err = d.oneOf(prim, at, k, []string{"allow", "ask"})
		case "rule":
			err = d.rules(prim)
		case "mcp":
			err = d.mcp(prim)
		case "ask":
			err = d.ask(prim)
		case "channel":
			err = d.channels(prim)
		case "agent":
			err = d.agentTable(prim)
		case "questions":
			err = d.questions(prim)
		default:
			err = d.unknown(at, k, "", topKeys)
		}
		if err != nil {
			return nil, err
		}
	}
	return d.file, nil
}

// syntaxHint says how to mend a file that is not TOML: the decoder's own
// usage text where it has one, else a word for the mistakes it names only
// in its message.
func syntaxHint(pe toml.ParseError) string {
	switch {
	case pe.Usage != "":
		return strings.SplitN(strings.TrimSpace(pe.Usage), "\n", 2)[0]
	case strings.HasSuffix(pe.Message, "has already been defined."):
		return `each key is set once in a table: give several values as a list, command = ["a *", "b *"], or write another [[rule]]`
	case strings.HasSuffix(pe.Message, "control characters: '0x0d'"):
		return "the file's lines end with a carriage return alone: save it with LF (or CRLF) line endings"
	}
	return "this is not valid TOML there: strings need quotes, lists [ ] and tables [[rule]] (see https://toml.io)"
}

type decoder struct {
	file *File
	md   toml.MetaData
	loc  *locator
}

func (d *decoder) errorf(at pos, hint, format string, args ...any) error {
	return &ConfigError{File: d.file.Path, Line: at.line, Col: at.col, Msg: fmt.Sprintf(format, args...), Hint: hint}
}

func (d *decoder) unknown(at pos, key, where string, known []string) error {
	hint := "known keys are " + strings.Join(known, ", ")
	if s := closest(key, known); s != "" {
		hint = fmt.Sprintf("did you mean %q?", s)
	}
	return d.errorf(at, hint, "unknown key %q%s", key, where)
}

func (d *decoder) value(prim toml.Primitive) (any, error) {
	var v any
	err := d.md.PrimitiveDecode(prim, &v)
	return v, err
}

func (d *decoder) str(prim toml.Primitive, at pos, key string) (string, error) {
	v, err := d.value(prim)
	if err != nil {
		return "", d.errorf(at, "", "%s: %v", key, err)
	}
	s, ok := v.(string)
	if !ok {
		return "", d.errorf(at, fmt.Sprintf(`write it as %s = "..."`, key), "%s must be a string, not %s", key, typeName(v))
	}
	return s, nil
}

func (d *decoder) oneOf(prim toml.Primitive, at pos, key string, values []string) (string, error) {
	s, err := d.str(prim, at, key)
	if err != nil {
		return "", err
	}
	if !slices.Contains(values, s) {
		hint := "use one of " + quoteList(values)
		if c := closest(s, values); c != "" {
			hint = fmt.Sprintf("did you mean %q?", c)
		}
		return "", d.errorf(at, hint, "%s %q is not one of %s", key, s, quoteList(values))
	}
	return s, nil
}

// strings decodes a matcher value: a string or a list of strings.
func (d *decoder) strings(prim toml.Primitive, at pos, key string) ([]string, error) {
	v, err := d.value(prim)
	if err != nil {
		return nil, d.errorf(at, "", "%s: %v", key, err)
	}
	switch v := v.(type) {
	case string:
		return []string{v}, nil
	case []any:
		out := make([]string, 0, len(v))
		for i, e := range v {
			s, ok := e.(string)
			if !ok {
				return nil, d.errorf(at, "every element must be a string", "%s[%d] is %s, not a string", key, i, typeName(e))
			}
			out = append(out, s)
		}
		if len(out) == 0 {
			return nil, d.errorf(at, "remove the key, or give at least one value", "%s is an empty list", key)
		}
		return out, nil
	}
	return nil, d.errorf(at, fmt.Sprintf(`write it as %s = "..." or %s = ["...", "..."]`, key, key), "%s must be a string or a list of strings, not %s", key, typeName(v))
}

func (d *decoder) rules(prim toml.Primitive) error {
	var tables []map[string]toml.Primitive
	if err := d.md.PrimitiveDecode(prim, &tables); err != nil {
		at := d.loc.topKey("rule")
		return d.errorf(at, "write each rule as a [[rule]] table", "rule must be a list of tables")
	}
	for i, table := range tables {
		r, err := d.rule(i, table)
		if err != nil {
			return err
		}
		d.file.Rules = append(d.file.Rules, r)
	}
	return nil
}

func (d *decoder) rule(i int, table map[string]toml.Primitive) (*Rule, error) {
	head := d.loc.rule(i)
	r := &Rule{File: d.file.Path, Line: head.line, Col: head.col, Layer: d.file.Layer}
	keys := make([]string, 0, len(table))
	for k := range table {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(a, b int) bool { return d.loc.ruleKey(i, keys[a]).line < d.loc.ruleKey(i, keys[b]).line })
	for _, k := range keys {
		prim, at := table[k], d.loc.ruleKey(i, k)
		var err error
		switch k {
		case "id":
			r.ID, err = d.str(prim, at, k)
		case "reason":
			r.Reason, err = d.str(prim, at, k)
		case "decision":
			var s string
			s, err = d.oneOf(prim, at, k, []string{"allow", "ask", "deny"})
			r.Decision = Decision(s)
		case "kind":
			r.Kinds, err = d.strings(prim, at, k)
			for _, kind := range r.Kinds {
				if err == nil && !slices.Contains(Kinds, kind) {
					hint := "ACP tool kinds are " + strings.Join(Kinds, ", ")
					if c := closest(kind, Kinds); c != "" {
						hint = fmt.Sprintf("did you mean %q?", c)
					}
					err = d.errorf(at, hint, "unknown kind %q", kind)
				}
			}
		case "modes":
			r.Modes, err = d.strings(prim, at, k)
			for _, m := range r.Modes {
				if err == nil && !slices.Contains(Modes, m) {
					err = d.errorf(at, "modes are "+strings.Join(Modes, ", "), "unknown mode %q", m)
				}
			}
		case "tool", "title", "mcp":
			var srcs []string
			if srcs, err = d.strings(prim, at, k); err == nil {
				var globs []*glob
				for _, s := range srcs {
					if k == "mcp" && !strings.Contains(s, "/") {
						err = d.errorf(at, `name the server and the tool, as "github/get_issue" or "github/*"`, "mcp pattern %q has no '/'", s)
						break
					}
					g, gerr := compileGlob(s)
					if gerr != nil {
						err = d.errorf(at, "", "%v", gerr)
						break
					}
					globs = append(globs, g)
				}
				switch k {
				case "tool":
					r.Tools = globs
				case "title":
					r.Titles = globs
				default:
					r.MCP = globs
				}
			}
		case "command":
			r.Commands, err = compileEach(d, prim, at, k, `write commands as shell words, as "git diff *"`, compileCommandPattern)
		case "command_regex":
			r.CommandRegex, err = compileEach(d, prim, at, k, "the syntax is RE2's: https://github.com/google/re2/wiki/Syntax", compileCommandRegex)
		case "path":
			r.Paths, err = compileEach(d, prim, at, k, "start a path pattern with /, ~/, ./ (the session's directory) or **/ (anywhere)", compilePathPattern)
		case "url":
			r.URLs, err = compileEach(d, prim, at, k, `write "https://example.com/docs/*" or "domain:example.com"`, compileURLPattern)
		case "unlock_protected":
			if d.file.Layer == Project {
				d.ignore(at, "unlock_protected", "a project file cannot unlock protected paths (unlock them in your user config)")
				continue
			}
			var v any
			if v, err = d.value(prim); err == nil {
				b, ok := v.(bool)
				if !ok {
					err = d.errorf(at, "write unlock_protected = true", "unlock_protected must be true or false, not %s", typeName(v))
				}
				r.UnlockProtected = b
			}
		case "examples", "counterexamples":
			var exs []Example
			if exs, err = d.examples(prim, at, k); err == nil {
				if k == "examples" {
					r.Examples = exs
				} else {
					r.Counterexamples = exs
				}
			}
		default:
			err = d.unknown(at, k, " in [[rule]]", ruleKeys)
		}
		if err != nil {
			return nil, err
		}
	}
	if len(r.Commands) > 0 && len(r.CommandRegex) > 0 {
		// The engine would allow what either matches, where the other
		// matchers of a rule must all match: whichever the writer meant,
		// one reading is looser than the other, so neither is guessed.
		return nil, d.errorf(d.loc.ruleKey(i, "command_regex"), "put the command patterns and the regex in two rules (a rule applies when every matcher it has matches)",
			"a rule takes command or command_regex, not both")
	}
	return r, d.checkRule(r, head)
}

// compileEach compiles each pattern of a matcher; the first that does not
// compile stops the file, with the matcher's hint.
func compileEach[T any](d *decoder, prim toml.Primitive, at pos, key, hint string, compile func(string) (T, error)) ([]T, error) {
	srcs, err := d.strings(prim, at, key)
	if err != nil {
		return nil, err
	}
	out := make([]T, 0, len(srcs))
	for _, s := range srcs {
		c, err := compile(s)
		if err != nil {
			return nil, d.errorf(at, hint, "%v", err)
		}
		out = append(out, c)
	}
	return out, nil
}

// compileCommandRegex compiles a command_regex, which matches a whole
// simple command.
func compileCommandRegex(s string) (*regexp.Regexp, error) {
	re, err := regexp.Compile(`^(?:` + s + `)$`)
	if err != nil {
		return nil, fmt.Errorf("command_regex %q: %v", s, err)
	}
	return re, nil
}

// regexSource is a command_regex as written, without the anchors
// compileCommandRegex adds.
func regexSource(re *regexp.Regexp) string {
	return strings.TrimSuffix(strings.TrimPrefix(re.String(), "^(?:"), ")$")
}

func (d *decoder) checkRule(r *Rule, head pos) error {
	if r.Decision == "" {
		return d.errorf(head, `add decision = "allow", "ask" or "deny"`, "rule has no decision")
	}
	if !r.hasActionMatcher() && len(r.Kinds) == 0 && len(r.Tools) == 0 && len(r.Titles) == 0 {
		return d.errorf(head, `a rule needs something to match: kind, tool, mcp, command, command_regex, path, url or title (kind = [...] covers whole kinds)`, "rule matches nothing in particular")
	}
	if r.UnlockProtected {
		if r.Decision != Allow {
			return d.errorf(head, "remove unlock_protected, or make the rule an allow rule", "unlock_protected only makes sense on an allow rule")
		}
		if len(r.Paths) == 0 {
			return d.errorf(head, "name the protected paths the rule opens with path = [...]", "unlock_protected needs a path matcher")
		}
	}
	return nil
}

func (d *decoder) examples(prim toml.Primitive, at pos, key string) ([]Example, error) {
	v, err := d.value(prim)
	if err != nil {
		return nil, d.errorf(at, "", "%s: %v", key, err)
	}
	list, ok := v.([]any)
	if !ok {
		list = []any{v}
	}
	var out []Example
	for i, e := range list {
		switch e := e.(type) {
		case string:
			out = append(out, Example{Text: e, Line: at.line})
		case map[string]any:
			fields := map[string]json.RawMessage{}
			for k, fv := range e {
				b, err := json.Marshal(fv)
				if err != nil {
					return nil, d.errorf(at, "", "%s[%d].%s cannot be read: %v", key, i, k, err)
				}
				fields[k] = b
			}
			out = append(out, Example{ToolCall: fields, Line: at.line})
		default:
			return nil, d.errorf(at, `give a command ("git status") or a tool call ({kind = "read", locations = [{path = "./README.md"}]})`, "%s[%d] is %s", key, i, typeName(e))
		}
	}
	return out, nil
}

func (d *decoder) mcp(prim toml.Primitive) error {
	var table map[string]toml.Primitive
	if err := d.md.PrimitiveDecode(prim, &table); err != nil {
		return d.errorf(d.loc.topKey("mcp"), "write [mcp.<server>] tables", "mcp must be a table of servers")
	}
	for name, p := range table {
		if name == "proxy" {
			if v, err := d.value(p); err == nil {
				if !isTable(v) {
					// [mcp] proxy = false, not a server called "proxy".
					at := d.loc.tableKey("proxy", "mcp")
					if d.proxyInProject(at, "[mcp] proxy") {
						continue
					}
					b, err := d.boolean(p, at, "proxy")
					if err != nil {
						return err
					}
					d.file.MCPProxy = &b
					continue
				}
			}
		}
		var keys map[string]toml.Primitive
		if err := d.md.PrimitiveDecode(p, &keys); err != nil {
			return d.errorf(d.loc.tableKey(name, "mcp"), `write [mcp.<server>] tables, or proxy = false directly under [mcp]`, "mcp.%s must be a table", name)
		}
		s := &MCPServer{}
		for k, p := range keys {
			at := d.loc.tableKey(k, "mcp", name)
			switch k {
			case "read_only_tools":
				srcs, err := d.strings(p, at, k)
				if err != nil {
					return err
				}
				for _, src := range srcs {
					g, err := compileGlob(src)
					if err != nil {
						return d.errorf(at, "", "%v", err)
					}
					s.ReadOnlyTools = append(s.ReadOnlyTools, g)
				}
			case "trust_annotations":
				b, err := d.boolean(p, at, k)
				if err != nil {
					return err
				}
				s.TrustAnnotations = b
			case "proxy":
				if d.proxyInProject(at, fmt.Sprintf("[mcp.%s] proxy", name)) {
					continue
				}
				b, err := d.boolean(p, at, k)
				if err != nil {
					return err
				}
				s.Proxy = &b
			default:
				return d.unknown(at, k, fmt.Sprintf(" in [mcp.%s]", name), mcpKeys)
			}
		}
		d.file.MCP[name] = s
	}
	return nil
}

// proxyInProject skips a proxy setting in a project file: turning the proxy
// off ends the governing of MCP calls, which a repository must not be able
// to do.
func (d *decoder) proxyInProject(at pos, what string) bool {
	if d.file.Layer != Project {
		return false
	}
	d.ignore(at, what, "a project file cannot turn the MCP proxy on or off (set proxy in your user config)")
	return true
}

// ignore records a setting of a project file that a project may not set,
// and is skipped.
func (d *decoder) ignore(at pos, what, why string) {
	d.file.Ignored = append(d.file.Ignored, fmt.Sprintf("%s:%d: ignored %s: %s", d.file.Path, at.line, what, why))
}

func (d *decoder) boolean(prim toml.Primitive, at pos, key string) (bool, error) {
	v, err := d.value(prim)
	if err != nil {
		return false, err
	}
	b, ok := v.(bool)
	if !ok {
		return false, d.errorf(at, fmt.Sprintf("write %s = true or %s = false", key, key), "%s must be true or false, not %s", key, typeName(v))
	}
	return b, nil
}

func isTable(v any) bool {
	_, ok := v.(map[string]any)
	return ok
}

func typeName(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case int64, float64:
		return "a number"
	case []any, []map[string]any:
		return "a list"
	case map[string]any:
		return "a table"
	}
	return fmt.Sprintf("a %T", v)
}

func quoteList(values []string) string {
	q := make([]string, len(values))
	for i, v := range values {
		q[i] = fmt.Sprintf("%q", v)
	}
	return strings.Join(q, ", ")
}

// closest returns the known word nearest to s when it is near enough to be
// a typo: fewer letters changed than s has, so that "x" is not taken for
// "id".
func closest(s string, known []string) string {
	best, bestDist := "", min(3, len(s))
	for _, k := range known {
		if d := editDistance(s, k); d < bestDist {
			best, bestDist = k, d
		}
	}
	if best == "" && len(s) >= 4 {
		for _, k := range known {
			if strings.HasPrefix(k, s) || strings.HasPrefix(s, k) {
				return k
			}
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
