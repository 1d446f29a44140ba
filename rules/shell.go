package rules

// This file reads a shell command the way the shell that runs it would, so that rules are
// matched against every program the command really starts. It never runs anything.
//
// The reading is conservative in one direction only: whatever it cannot see through exactly
// (an expansion whose value is only known at run time, a program that runs a string of code,
// a shell it cannot parse) is reported as Opaque, and an opaque command is never allowed.
// Everything that is visible is still listed, so deny rules see it.

import (
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/syntax"
)

// MaxScript is the longest command the broker reads; a longer one is never allowed.
const MaxScript = 8 << 10

const (
	// maxShellDepth bounds how many shells deep `bash -c 'bash -c ...'` is read.
	maxShellDepth = 8
	// maxNesting bounds the nesting of statement lists (subshells, groups, substitutions,
	// bodies) within one parsed script.
	maxNesting = 64
	// maxBraceVariants bounds how many brace-expanded variants of one command are listed.
	maxBraceVariants = 64
	// maxCommands and maxParses bound the total work for one input, whatever it nests.
	maxCommands = 2048
	maxParses   = 256
)

// SimpleCommand is one command a shell would run.
type SimpleCommand struct {
	Argv      []string // words after quote removal; a word that is not literal is kept as written in the source
	Assigns   []string // VAR=value prefixes, as written
	Redirects []Redirect
	// Opaque lists why the command cannot be fully seen through (e.g. "command substitution",
	// "eval"). An opaque command is never allowed by any rule or default; deny rules are still
	// checked on what is visible.
	Opaque []string
}

// Redirect is a file a command's redirection opens. Duplications such as 2>&1 name no file
// and here-documents are not files, so neither is listed.
type Redirect struct {
	Op     string // as written: ">", ">>", "2>", "&>", "&>>", ">|", "<", "<>", ...
	Target string // after quote removal (as written if not literal)
	Write  bool   // the target file is written (or created/truncated)
	Static bool   // the target is a literal path: no expansion, substitution or glob
}

// Script is what a command string or argv was read into.
type Script struct {
	Commands []SimpleCommand
	// Opaque lists why the script as a whole cannot be seen through (it does not parse as
	// bash, is longer than MaxScript, nests too deep). Visible commands may still be listed
	// for deny checks.
	Opaque []string
}

// ParseShell reads a command string, such as Claude Code's rawInput.command or Gemini CLI's
// title, as bash would. A command with no Argv only assigns variables or opens files.
func ParseShell(src string) Script {
	if reasons := unreadableSource(len(src), strings.ContainsRune(src, 0)); reasons != nil {
		return Script{Opaque: reasons}
	}
	b := &readBudget{}
	script := readSource(src, "bash", 0, b)
	return b.finish(script)
}

// ParseArgv reads an argv array, such as Codex's rawInput.command. The words are taken
// literally, as execve takes them; a shell invocation among them (["/bin/bash", "-lc",
// "git status && rm x"]) is read as a shell would read its script.
func ParseArgv(argv []string) Script {
	if len(argv) == 0 {
		return Script{Opaque: []string{"empty argv"}}
	}
	size, hasNUL := 0, false
	for _, arg := range argv {
		size += len(arg) + 1
		hasNUL = hasNUL || strings.ContainsRune(arg, 0)
	}
	if reasons := unreadableSource(size, hasNUL); reasons != nil {
		return Script{Opaque: reasons}
	}
	b := &readBudget{}
	r := &commandReader{budget: b}
	literal := make([]bool, len(argv))
	for i := range literal {
		literal[i] = true
	}
	r.finish(SimpleCommand{Argv: slices.Clone(argv)}, literal, nil, false)
	return b.finish(Script{Commands: r.out})
}

// unreadableSource says why a source of this size cannot be read at all.
func unreadableSource(size int, hasNUL bool) []string {
	switch {
	case size > MaxScript:
		return []string{fmt.Sprintf("longer than %d bytes", MaxScript)}
	case hasNUL:
		// A shell and execve both cut a string at NUL, so what runs is not what was sent.
		return []string{"contains a NUL byte"}
	}
	return nil
}

// Normalized returns the argv a deny rule is matched against: wrappers that only run their
// arguments (env, command, builtin, nice, nohup, timeout, time, stdbuf, ionice, chrt, setsid,
// unbuffer, busybox) are stripped, and the program is reduced to its base name, so
// `env X=1 /usr/bin/git push` reads as `git push`. A wrapper whose options cannot be read is
// kept with what follows it. Allow rules match Argv, not this.
func (c SimpleCommand) Normalized() []string {
	prefix := readWrappers(c.Argv)
	out := slices.Clone(c.Argv[prefix.start:])
	if len(out) > 0 {
		out[0] = programBase(out[0])
	}
	return out
}

// Opaqueness returns every reason the script cannot be seen through, script-level first,
// each once.
func (s Script) Opaqueness() []string {
	var all []string
	all = appendUnique(all, s.Opaque...)
	for _, c := range s.Commands {
		all = appendUnique(all, c.Opaque...)
	}
	return all
}

func appendUnique(list []string, items ...string) []string {
	for _, item := range items {
		if !slices.Contains(list, item) {
			list = append(list, item)
		}
	}
	return list
}

// readBudget bounds the work one input can cause, across every nested script and variant.
type readBudget struct {
	commands, parses int
	exhausted        bool
}

func (b *readBudget) finish(s Script) Script {
	if b.exhausted {
		s.Opaque = appendUnique(s.Opaque, "too many commands to read")
	}
	return s
}

// commandReader collects the simple commands of one parsed source.
type commandReader struct {
	src        string // the source being read, to quote words as written
	shellDepth int    // how many `sh -c` levels this source is nested in
	nesting    int
	tooDeep    bool
	budget     *readBudget
	out        []SimpleCommand
}

// readSource parses src in the dialect of the named shell and lists its commands.
func readSource(src, shell string, shellDepth int, b *readBudget) Script {
	if len(src) > MaxScript {
		return Script{Opaque: []string{fmt.Sprintf("longer than %d bytes", MaxScript)}}
	}
	b.parses++
	if b.parses > maxParses {
		b.exhausted = true
		return Script{Opaque: []string{"too many commands to read"}}
	}
	r := &commandReader{src: src, shellDepth: shellDepth, budget: b}
	var opaque []string
	parsers := parserPools[dialectOf(shell)]
	parser := parsers.Get().(*syntax.Parser)
	file, err := parser.Parse(strings.NewReader(src), "")
	parsers.Put(parser)
	if err != nil {
		opaque = append(opaque, fmt.Sprintf("does not parse as %s: %v", shell, err))
		// Statements that ended before the error were parsed whole; list them for deny rules.
		var parseErr syntax.ParseError
		if file != nil && errors.As(err, &parseErr) {
			for _, stmt := range file.Stmts {
				if stmt.End().IsValid() && stmt.End().Offset() < parseErr.Pos.Offset() {
					r.stmt(stmt, redirection{})
				}
			}
		}
	} else {
		r.stmts(file.Stmts, redirection{})
	}
	if r.tooDeep {
		opaque = append(opaque, "nests too deep")
	}
	return Script{Commands: r.out, Opaque: opaque}
}

// parserPools hold parsers to reuse, one pool per dialect: a parser is
// kilobytes of buffers, and a request's command may be parsed several times
// (each shell's script, in bash and in its own dialect). A parser may be
// reused once its Parse has returned; the tree it returned is its caller's.
var parserPools = func() map[syntax.LangVariant]*sync.Pool {
	pools := map[syntax.LangVariant]*sync.Pool{}
	for _, lang := range []syntax.LangVariant{syntax.LangBash, syntax.LangPOSIX, syntax.LangZsh, syntax.LangMirBSDKorn} {
		pools[lang] = &sync.Pool{New: func() any { return syntax.NewParser(syntax.Variant(lang)) }}
	}
	return pools
}()

func dialectOf(shell string) syntax.LangVariant {
	switch shell {
	case "sh":
		return syntax.LangPOSIX
	case "zsh":
		return syntax.LangZsh
	case "mksh":
		return syntax.LangMirBSDKorn
	}
	return syntax.LangBash
}

func (r *commandReader) emit(cmd SimpleCommand, reasons []string) {
	if r.budget.commands >= maxCommands {
		r.budget.exhausted = true
		return
	}
	r.budget.commands++
	cmd.Opaque = appendUnique(cmd.Opaque, reasons...)
	r.out = append(r.out, cmd)
}

// written returns node as it appears in the source.
func (r *commandReader) written(node syntax.Node) string {
	start, end := node.Pos(), node.End()
	if start.IsValid() && end.IsValid() && start.Offset() <= end.Offset() && end.Offset() <= uint(len(r.src)) {
		return r.src[start.Offset():end.Offset()]
	}
	var sb strings.Builder
	if err := syntax.NewPrinter().Print(&sb, node); err != nil {
		return "?"
	}
	return sb.String()
}

// redirection is what the redirections around a command amount to: those of the command
// itself and of every compound command it is in, which apply to it too.
type redirection struct {
	files   []Redirect
	reasons []string // why a redirection makes the command opaque
	hereDoc bool     // standard input is a here-document or here-string
}

func (outer redirection) with(inner redirection) redirection {
	return redirection{
		files:   slices.Concat(outer.files, inner.files),
		reasons: slices.Concat(outer.reasons, inner.reasons),
		hereDoc: outer.hereDoc || inner.hereDoc,
	}
}

func (r *commandReader) stmts(list []*syntax.Stmt, around redirection) {
	r.nesting++
	defer func() { r.nesting-- }()
	if r.nesting > maxNesting {
		r.tooDeep = true
		return
	}
	for _, stmt := range list {
		r.stmt(stmt, around)
	}
}

// stmt lists the commands of one statement, within the redirections around it.
func (r *commandReader) stmt(stmt *syntax.Stmt, around redirection) {
	redir := around.with(r.redirects(stmt.Redirs))
	switch cmd := stmt.Cmd.(type) {
	case nil:
		// `> file` alone still creates or truncates the file.
		r.emit(SimpleCommand{Redirects: redir.files}, redir.reasons)
	case *syntax.CallExpr:
		r.call(cmd, redir)
	case *syntax.BinaryCmd:
		r.stmt(cmd.X, redir)
		r.stmt(cmd.Y, redir)
	case *syntax.Subshell:
		r.stmts(cmd.Stmts, redir)
	case *syntax.Block:
		r.stmts(cmd.Stmts, redir)
	case *syntax.IfClause:
		for clause := cmd; clause != nil; clause = clause.Else {
			r.stmts(clause.Cond, redir)
			r.stmts(clause.Then, redir)
		}
	case *syntax.WhileClause:
		r.stmts(cmd.Cond, redir)
		r.stmts(cmd.Do, redir)
	case *syntax.ForClause:
		r.forHeader(cmd, redir)
		r.stmts(cmd.Do, redir)
	case *syntax.CaseClause:
		r.caseHeader(cmd, redir)
		for _, item := range cmd.Items {
			r.stmts(item.Stmts, redir)
		}
	case *syntax.FuncDecl:
		// The body runs whenever the function is called, possibly under a name an allow
		// rule trusts, so its commands are listed as if they ran here.
		r.stmts([]*syntax.Stmt{cmd.Body}, redir)
	case *syntax.TimeClause:
		if cmd.Stmt != nil {
			r.stmts([]*syntax.Stmt{cmd.Stmt}, redir)
		}
	case *syntax.CoprocClause:
		reasons := redir.reasons
		if cmd.Name != nil {
			reasons = append(reasons, r.listSubstitutions(cmd.Name)...)
		}
		r.stmts([]*syntax.Stmt{cmd.Stmt}, redirection{files: redir.files, reasons: reasons, hereDoc: redir.hereDoc})
	case *syntax.TestClause:
		r.testClause(cmd, redir)
	case *syntax.DeclClause:
		r.declClause(cmd, redir)
	case *syntax.ArithmCmd:
		// Arithmetic evaluates array subscripts, and a subscript can hold a command
		// substitution that runs: x='a[$(rm y)]'; ((x)).
		r.listSubstitutions(cmd)
		r.emit(SimpleCommand{Argv: []string{"((", r.written(cmd.X), "))"}, Redirects: redir.files},
			append(redir.reasons, "arithmetic command"))
	case *syntax.LetClause:
		r.listSubstitutions(cmd)
		argv := []string{"let"}
		for _, expr := range cmd.Exprs {
			argv = append(argv, r.written(expr))
		}
		r.emit(SimpleCommand{Argv: argv, Redirects: redir.files}, append(redir.reasons, "let"))
	default:
		// A construct this reader does not model (bats' @test, say): list whatever runs
		// inside it and never allow it.
		syntax.Walk(cmd, func(node syntax.Node) bool {
			switch node := node.(type) {
			case *syntax.Stmt:
				r.stmts([]*syntax.Stmt{node}, redir)
				return false
			case *syntax.CmdSubst:
				r.stmts(node.Stmts, redirection{})
				return false
			case *syntax.ProcSubst:
				r.stmts(node.Stmts, redirection{})
				return false
			}
			return true
		})
		r.emit(SimpleCommand{Argv: []string{r.written(cmd)}, Redirects: redir.files},
			append(redir.reasons, fmt.Sprintf("unsupported construct %T", cmd)))
	}
}

// listSubstitutions lists the commands of every command and process substitution inside
// node, and reports which kinds it found.
func (r *commandReader) listSubstitutions(node syntax.Node) []string {
	var reasons []string
	syntax.Walk(node, func(node syntax.Node) bool {
		switch node := node.(type) {
		case *syntax.CmdSubst:
			reasons = appendUnique(reasons, "command substitution")
			r.stmts(node.Stmts, redirection{})
			return false
		case *syntax.ProcSubst:
			reasons = appendUnique(reasons, "process substitution")
			r.stmts(node.Stmts, redirection{})
			return false
		}
		return true
	})
	return reasons
}

// call lists one simple command, and each brace-expanded variant of it.
func (r *commandReader) call(call *syntax.CallExpr, redir redirection) {
	cmd := SimpleCommand{Redirects: redir.files}
	reasons := slices.Clone(redir.reasons)
	for _, assign := range call.Assigns {
		reasons = append(reasons, r.listSubstitutions(assign)...)
		cmd.Assigns = append(cmd.Assigns, r.written(assign))
		reasons = append(reasons, r.assignReasons(assign)...)
	}
	literal := make([]bool, len(call.Args))
	var braced []int
	for i, arg := range call.Args {
		reasons = append(reasons, r.listSubstitutions(arg)...)
		word := r.wordValue(arg)
		cmd.Argv = append(cmd.Argv, word.value)
		literal[i] = word.literal
		reasons = append(reasons, word.reasons...)
		if unknownTilde(arg) {
			reasons = appendUnique(reasons, "~user, ~+ or ~- expansion")
		}
		switch {
		case i == 0 && word.globbed:
			reasons = append(reasons, "glob in program name")
		case word.literal && word.globReachesHidden():
			reasons = append(reasons, "glob in a directory or hidden name")
		}
		if hasBraceExpansion(arg) {
			braced = append(braced, i)
		}
	}
	if len(braced) == 0 {
		r.finish(cmd, literal, reasons, redir.hereDoc)
		return
	}

	// Bash expands `git pu{sh,ll}` to `git push pull`. The command is listed as written,
	// and each variant on its own, so that a deny rule on `git push` sees it. Only the
	// variants are read further: the written form is not what runs.
	reasons = append(reasons, "brace expansion")
	variants, ok := r.braceVariants(call.Args, braced)
	if !ok {
		reasons = append(reasons, "brace expansion too large")
	}
	r.emit(cmd, reasons)
	for _, variant := range variants {
		argv := slices.Clone(cmd.Argv)
		variantLiteral := slices.Clone(literal)
		for j, i := range braced {
			argv[i] = variant[j].value
			variantLiteral[i] = variant[j].literal
		}
		r.finish(SimpleCommand{Argv: argv, Assigns: cmd.Assigns, Redirects: cmd.Redirects}, variantLiteral, reasons, redir.hereDoc)
	}
}

func hasBraceExpansion(word *syntax.Word) bool {
	split := &syntax.Word{Parts: slices.Clone(word.Parts)}
	if !syntax.SplitBraces(split) {
		return false
	}
	return slices.ContainsFunc(split.Parts, func(part syntax.WordPart) bool {
		_, ok := part.(*syntax.BraceExp)
		return ok
	})
}

// braceVariants returns every combination of the expansions of the braced words, or false
// if there are more than maxBraceVariants.
func (r *commandReader) braceVariants(args []*syntax.Word, braced []int) ([][]wordInfo, bool) {
	variants := [][]wordInfo{nil}
	groups := 0
	for _, i := range braced {
		split := &syntax.Word{Parts: slices.Clone(args[i].Parts)}
		syntax.SplitBraces(split)
		// Each group at least doubles the count; refuse before expanding, which costs
		// time in the number of groups for every word it yields.
		groups += braceGroups(split.Parts)
		if 1<<min(groups, 30) > maxBraceVariants {
			return nil, false
		}
		var expansions []wordInfo
		for word, err := range expand.BracesSeq(nil, split) {
			if err != nil || len(expansions) >= maxBraceVariants {
				return nil, false
			}
			expansions = append(expansions, r.wordValue(word))
		}
		if len(variants)*len(expansions) > maxBraceVariants {
			return nil, false
		}
		var next [][]wordInfo
		for _, prefix := range variants {
			for _, expansion := range expansions {
				next = append(next, append(slices.Clone(prefix), expansion))
			}
		}
		variants = next
	}
	return variants, true
}

// braceGroups counts the brace expansions in word parts, nested ones included.
func braceGroups(parts []syntax.WordPart) int {
	n := 0
	for _, part := range parts {
		if brace, ok := part.(*syntax.BraceExp); ok {
			n++
			for _, elem := range brace.Elems {
				n += braceGroups(elem.Parts)
			}
		}
	}
	return n
}

// redirects reads a statement's own redirections.
func (r *commandReader) redirects(list []*syntax.Redirect) redirection {
	var out []Redirect
	var reasons []string
	hereDoc := false
	for _, redir := range list {
		reasons = append(reasons, r.listSubstitutions(redir)...)
		op := redir.Op.String()
		if redir.N != nil {
			op = redir.N.Value + op
		}
		switch redir.Op {
		case syntax.Hdoc, syntax.DashHdoc:
			hereDoc = true
			if redir.Hdoc != nil && !isLiteralWord(redir.Hdoc) {
				// An unquoted delimiter lets the body expand, and expansions can run code.
				reasons = append(reasons, "expansion in here-document")
			}
			continue
		case syntax.WordHdoc:
			hereDoc = true
			reasons = append(reasons, r.wordValue(redir.Word).reasons...)
			continue
		}
		target := r.wordValue(redir.Word)
		reasons = append(reasons, target.reasons...)
		write := true
		switch redir.Op {
		case syntax.RdrIn:
			write = false
		case syntax.DplIn, syntax.DplOut:
			if target.literal && isFileDescriptor(target.value) {
				continue // 2>&1, >&2, <&0, >&-: no file is named
			}
			// `>& file` is bash's old spelling of `&> file`.
			write = redir.Op == syntax.DplOut
		}
		static := target.literal && !target.globbed && !hasBraceExpansion(redir.Word) && !tildeNamesUser(target.value)
		if !static {
			reasons = append(reasons, "redirection target not static")
		}
		if strings.HasPrefix(target.value, "/dev/tcp/") || strings.HasPrefix(target.value, "/dev/udp/") {
			// bash opens a network connection for these names; no file is involved.
			reasons = append(reasons, "network redirection")
		}
		out = append(out, Redirect{Op: op, Target: target.value, Write: write, Static: static})
	}
	return redirection{files: out, reasons: reasons, hereDoc: hereDoc}
}

func isFileDescriptor(s string) bool {
	s = strings.TrimSuffix(s, "-")
	if s == "" {
		return true // `>&-` closes the descriptor
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// tildeNamesUser reports a leading ~user, ~+ or ~- form, which the shell expands to a
// directory the engine cannot know; ~ and ~/ are left for the engine to expand.
func tildeNamesUser(s string) bool {
	return strings.HasPrefix(s, "~") && len(s) > 1 && s[1] != '/'
}

// unknownTilde reports a word in which bash expands a tilde prefix other than ~ and ~/
// (~user, ~+, ~-, ~2) to a directory the engine cannot know: at its start, or in a word
// that looks like an assignment (`of=~root/x`, `p=a:~+/x`) after its = or a colon. A path
// check would see a word the program never gets: `cat ~me/.ssh/id_rsa`.
func unknownTilde(word *syntax.Word) bool {
	if len(word.Parts) == 0 {
		return false
	}
	lit, ok := word.Parts[0].(*syntax.Lit)
	if !ok {
		return false
	}
	s := lit.Value
	starts := []int{0}
	if eq := strings.IndexByte(s, '='); eq > 0 && validName(s[:eq]) {
		starts = append(starts, eq+1)
		for i := eq + 1; i < len(s); i++ {
			if s[i] == ':' {
				starts = append(starts, i+1)
			}
		}
	}
	for _, at := range starts {
		if at+1 < len(s) && s[at] == '~' && s[at+1] != '/' && s[at+1] != ':' {
			return true
		}
	}
	return false
}

func isLiteralWord(word *syntax.Word) bool {
	for _, part := range word.Parts {
		if _, ok := part.(*syntax.Lit); !ok {
			return false
		}
	}
	return true
}

// wordInfo is a word after quote removal.
type wordInfo struct {
	value   string   // after quote removal; as written if not literal
	literal bool     // the value is exactly what the shell passes on
	reasons []string // why it is not literal
	globbed bool     // holds an unquoted glob character
	globAt  []int    // offsets in value of the unquoted glob characters
}

// globReachesHidden reports a glob that can match a name the literal word does not show
// to a path check: one in a directory component (*/x, ~/.ss?/id_rsa) or in a component
// starting with a dot (.en?). A glob elsewhere matches only visible names in a directory
// the word names literally; bash never matches a leading dot with a wildcard.
func (w wordInfo) globReachesHidden() bool {
	for _, at := range w.globAt {
		start := strings.LastIndexByte(w.value[:at], '/') + 1
		if strings.IndexByte(w.value[at:], '/') >= 0 || w.value[start] == '.' {
			return true
		}
	}
	return false
}

// wordValue removes quotes from a word exactly as bash would. A word whose value depends on
// expansion keeps its written form and says why.
func (r *commandReader) wordValue(word *syntax.Word) wordInfo {
	info := wordInfo{literal: true}
	var sb strings.Builder
	for _, part := range word.Parts {
		switch part := part.(type) {
		case *syntax.Lit:
			value, globAt := unquotedLiteral(part.Value)
			for _, at := range globAt {
				info.globAt = append(info.globAt, sb.Len()+at)
			}
			sb.WriteString(value)
			info.globbed = info.globbed || len(globAt) > 0
		case *syntax.SglQuoted:
			if !part.Dollar {
				sb.WriteString(part.Value)
				break
			}
			value, ok := decodeANSIC(part.Value)
			if !ok {
				info.reasons = appendUnique(info.reasons, "$'...' escape that cannot be decoded")
			}
			sb.WriteString(value)
		case *syntax.DblQuoted:
			if part.Dollar {
				info.reasons = appendUnique(info.reasons, `locale string $"..."`)
			}
			for _, inner := range part.Parts {
				if lit, ok := inner.(*syntax.Lit); ok {
					sb.WriteString(doubleQuotedLiteral(lit.Value))
				} else {
					info.reasons = appendUnique(info.reasons, expansionKind(inner))
				}
			}
		default:
			info.reasons = appendUnique(info.reasons, expansionKind(part))
		}
	}
	if len(info.reasons) > 0 {
		info.literal = false
		info.value = r.written(word)
		return info
	}
	info.value = sb.String()
	return info
}

func expansionKind(part syntax.WordPart) string {
	switch part.(type) {
	case *syntax.ParamExp:
		return "parameter expansion"
	case *syntax.CmdSubst:
		return "command substitution"
	case *syntax.ProcSubst:
		return "process substitution"
	case *syntax.ArithmExp:
		return "arithmetic expansion"
	case *syntax.ExtGlob:
		return "extended glob"
	case *syntax.BraceExp:
		return "brace expansion"
	}
	return fmt.Sprintf("unsupported word part %T", part)
}

// unquotedLiteral removes backslash escapes from an unquoted literal and reports where
// unescaped glob characters remain: * and ?, and [ when a ] follows it. The parser has
// already removed line continuations.
func unquotedLiteral(s string) (value string, globAt []int) {
	var sb strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '\\' && i+1 < len(s) {
			i++
			sb.WriteByte(s[i])
			continue
		}
		if c == '*' || c == '?' || (c == '[' && strings.IndexByte(s[i:], ']') > 0) {
			globAt = append(globAt, sb.Len())
		}
		sb.WriteByte(c)
	}
	return sb.String(), globAt
}

// doubleQuotedLiteral removes the backslashes that escape a character inside double quotes;
// any other backslash stays, as in bash.
func doubleQuotedLiteral(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var sb strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("$`\"\\", s[i+1]) >= 0 {
			i++
		}
		sb.WriteByte(s[i])
	}
	return sb.String()
}

// decodeANSIC decodes the body of a $'...' string as bash does, for the escapes whose
// meaning does not depend on the locale or the shell version. Any other escape, and a NUL
// (where bash cuts the string), reports false.
func decodeANSIC(s string) (string, bool) {
	var sb strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			sb.WriteByte(s[i])
			continue
		}
		i++
		if i == len(s) {
			return s, false
		}
		var decoded byte
		switch e := s[i]; e {
		case 'a':
			decoded = '\a'
		case 'b':
			decoded = '\b'
		case 'e', 'E':
			decoded = 0x1b
		case 'f':
			decoded = '\f'
		case 'n':
			decoded = '\n'
		case 'r':
			decoded = '\r'
		case 't':
			decoded = '\t'
		case 'v':
			decoded = '\v'
		case '\\', '\'', '"', '?':
			decoded = e
		case 'x':
			n, width := leadingDigits(s[i+1:], 16, 2)
			if width == 0 {
				return s, false
			}
			decoded, i = byte(n), i+width
		case '0', '1', '2', '3', '4', '5', '6', '7':
			n, width := leadingDigits(s[i:], 8, 3)
			if n > 0xff {
				return s, false
			}
			decoded, i = byte(n), i+width-1
		default:
			return s, false
		}
		if decoded == 0 {
			return s, false
		}
		sb.WriteByte(decoded)
	}
	return sb.String(), true
}

// leadingDigits parses up to max digits of the given base at the start of s.
func leadingDigits(s string, base, max int) (n, width int) {
	for width < max && width < len(s) {
		d, err := strconv.ParseUint(s[width:width+1], base, 8)
		if err != nil {
			break
		}
		n = n*base + int(d)
		width++
	}
	return n, width
}

// assignReasons says why an assignment makes a command opaque.
func (r *commandReader) assignReasons(assign *syntax.Assign) []string {
	var reasons []string
	if assign.Name != nil {
		reasons = append(reasons, dangerousVariable(assign.Name.Value)...)
	}
	if assign.Index != nil && !r.isIntegerIndex(assign.Index) {
		reasons = append(reasons, "array subscript")
	}
	if assign.Value != nil {
		reasons = append(reasons, r.wordValue(assign.Value).reasons...)
	}
	if assign.Array != nil {
		for _, elem := range assign.Array.Elems {
			if elem.Index != nil && !r.isIntegerIndex(elem.Index) {
				reasons = append(reasons, "array subscript")
			}
			if elem.Value != nil {
				reasons = append(reasons, r.wordValue(elem.Value).reasons...)
			}
		}
	}
	return reasons
}

// isIntegerIndex reports a subscript that is a plain number. Any other subscript is
// evaluated as arithmetic, which runs substitutions hidden in variables' values.
func (r *commandReader) isIntegerIndex(index syntax.ArithmExpr) bool {
	word, ok := index.(*syntax.Word)
	if !ok {
		return false
	}
	info := r.wordValue(word)
	return info.literal && isDecimal(info.value)
}

func isDecimal(s string) bool {
	s = strings.TrimLeft(s, "+-")
	return s != "" && strings.Trim(s, "0123456789") == ""
}

// dangerousVariables change which program runs, or make the shell or the program run code
// of the variable's choosing. Setting one makes a command opaque; other variables are
// listed in Assigns for the engine to judge.
var dangerousVariables = map[string]bool{
	"PATH": true, "BASH_ENV": true, "ENV": true, "SHELLOPTS": true, "BASHOPTS": true,
	"IFS": true, "PS4": true, "PROMPT_COMMAND": true, "CDPATH": true, "HOME": true,
	"OLDPWD": true, "PWD": true, "GLOBIGNORE": true, "XDG_CONFIG_HOME": true,
	"PAGER": true, "EDITOR": true, "VISUAL": true, "MANPAGER": true, "LESSOPEN": true,
	"LESSCLOSE": true, "SSH_ASKPASS": true, "SUDO_ASKPASS": true, "NODE_OPTIONS": true,
	"PYTHONSTARTUP": true, "PYTHONPATH": true, "PYTHONHOME": true, "PERL5OPT": true,
	"PERL5LIB": true, "PERLLIB": true, "RUBYOPT": true, "RUBYLIB": true,
	"JAVA_TOOL_OPTIONS": true, "_JAVA_OPTIONS": true, "GOFLAGS": true,
	"RUSTC_WRAPPER": true, "GCONV_PATH": true,
}

var dangerousVariablePrefixes = []string{"LD_", "DYLD_", "GIT_", "BASH_FUNC_"}

func dangerousVariable(name string) []string {
	if dangerousVariables[name] || slices.ContainsFunc(dangerousVariablePrefixes, func(prefix string) bool {
		return strings.HasPrefix(name, prefix)
	}) {
		return []string{"assigns " + name}
	}
	return nil
}

// forHeader lists a for or select loop's word list when it is not literal: the loop
// variable then holds values only known at run time.
func (r *commandReader) forHeader(clause *syntax.ForClause, redir redirection) {
	redirects, reasons := redir.files, slices.Clone(redir.reasons)
	keyword := "for"
	if clause.Select {
		keyword = "select"
	}
	switch loop := clause.Loop.(type) {
	case *syntax.CStyleLoop:
		r.listSubstitutions(loop)
		r.emit(SimpleCommand{Argv: []string{keyword, r.written(loop)}, Redirects: redirects},
			append(reasons, "arithmetic command"))
	case *syntax.WordIter:
		var argv []string
		argv, reasons = r.appendWords([]string{keyword, loop.Name.Value, "in"}, reasons, loop.Items)
		if len(reasons) > 0 {
			r.emit(SimpleCommand{Argv: argv, Redirects: redirects}, reasons)
		}
	}
}

// caseHeader lists a case statement's word and patterns when any of them is not literal.
func (r *commandReader) caseHeader(clause *syntax.CaseClause, redir redirection) {
	redirects, reasons := redir.files, slices.Clone(redir.reasons)
	words := []*syntax.Word{clause.Word}
	for _, item := range clause.Items {
		words = append(words, item.Patterns...)
	}
	argv, reasons := r.appendWords([]string{"case"}, reasons, words)
	if len(reasons) > 0 {
		r.emit(SimpleCommand{Argv: argv, Redirects: redirects}, reasons)
	}
}

// appendWords appends each word's value to argv, and to reasons why the
// word is not literal, its substitutions included.
func (r *commandReader) appendWords(argv, reasons []string, words []*syntax.Word) ([]string, []string) {
	for _, word := range words {
		reasons = append(reasons, r.listSubstitutions(word)...)
		info := r.wordValue(word)
		argv = append(argv, info.value)
		reasons = append(reasons, info.reasons...)
	}
	return argv, reasons
}

// testClause lists `[[ ... ]]` as a command. Its arithmetic operators and -v evaluate their
// operands, which runs substitutions hidden in variables: x='a[$(rm y)]'; [[ x -eq 1 ]].
func (r *commandReader) testClause(clause *syntax.TestClause, redir redirection) {
	redirects := redir.files
	reasons := append(slices.Clone(redir.reasons), r.listSubstitutions(clause)...)
	argv := []string{"[["}
	var walk func(expr syntax.TestExpr)
	operand := func(expr syntax.TestExpr) (string, bool) {
		word, ok := expr.(*syntax.Word)
		if !ok {
			return "", false
		}
		info := r.wordValue(word)
		return info.value, info.literal
	}
	walk = func(expr syntax.TestExpr) {
		switch expr := expr.(type) {
		case *syntax.Word:
			info := r.wordValue(expr)
			argv = append(argv, info.value)
			reasons = append(reasons, info.reasons...)
		case *syntax.BinaryTest:
			switch expr.Op {
			case syntax.TsEql, syntax.TsNeq, syntax.TsLeq, syntax.TsGeq, syntax.TsLss, syntax.TsGtr:
				x, xLiteral := operand(expr.X)
				y, yLiteral := operand(expr.Y)
				if !xLiteral || !yLiteral || !isDecimal(x) || !isDecimal(y) {
					reasons = append(reasons, "[[ evaluates arithmetic")
				}
			}
			walk(expr.X)
			argv = append(argv, expr.Op.String())
			walk(expr.Y)
		case *syntax.UnaryTest:
			if expr.Op == syntax.TsVarSet || expr.Op == syntax.TsRefVar {
				reasons = append(reasons, "[[ evaluates a variable name")
			}
			argv = append(argv, expr.Op.String())
			walk(expr.X)
		case *syntax.ParenTest:
			argv = append(argv, "(")
			walk(expr.X)
			argv = append(argv, ")")
		}
	}
	walk(clause.X)
	argv = append(argv, "]]")
	r.emit(SimpleCommand{Argv: argv, Redirects: redirects}, reasons)
}

// declClause lists declare, local, export, readonly, typeset and nameref as the command they
// are; their arguments are words, whatever the parser made of them.
func (r *commandReader) declClause(clause *syntax.DeclClause, redir redirection) {
	reasons := slices.Clone(redir.reasons)
	argv := []string{clause.Variant.Value}
	literal := []bool{true}
	for _, assign := range clause.Args {
		reasons = append(reasons, r.listSubstitutions(assign)...)
		var arg string
		argLiteral := true
		switch {
		case assign.Naked && assign.Name == nil:
			info := r.wordValue(assign.Value)
			arg, argLiteral = info.value, info.literal
			reasons = append(reasons, info.reasons...)
		case assign.Naked:
			arg = r.written(assign)
		default:
			reasons = append(reasons, r.assignReasons(assign)...)
			if assign.Index != nil {
				arg, argLiteral = r.written(assign), false
				break
			}
			arg = assign.Name.Value
			if assign.Append {
				arg += "+="
			} else {
				arg += "="
			}
			switch {
			case assign.Array != nil:
				arg += r.written(assign.Array)
			case assign.Value != nil:
				info := r.wordValue(assign.Value)
				arg += info.value
				argLiteral = info.literal
			}
		}
		argv = append(argv, arg)
		literal = append(literal, argLiteral)
	}
	r.finish(SimpleCommand{Argv: argv, Redirects: redir.files}, literal, reasons, redir.hereDoc)
}

// finish lists a command whose words are known: it looks through wrappers to the program
// that runs, reads a shell's script in place of the shell, and marks programs that run code
// the reader cannot see. literal[i] reports whether cmd.Argv[i] is exactly what runs.
func (r *commandReader) finish(cmd SimpleCommand, literal []bool, reasons []string, hereDoc bool) {
	reasons = slices.Clone(reasons)
	prefix := readWrappers(cmd.Argv)
	reasons = append(reasons, prefix.reasons...)
	for _, assignment := range prefix.env {
		name, _, _ := strings.Cut(assignment, "=")
		reasons = append(reasons, dangerousVariable(name)...)
	}
	argv, argvLiteral := cmd.Argv[prefix.start:], literal[prefix.start:]
	if len(argv) == 0 {
		r.emit(cmd, reasons)
		return
	}
	program := programKey(argv[0])
	if strings.HasPrefix(argv[0], "=") {
		// zsh replaces =name with the path of the program name.
		reasons = append(reasons, "program name starts with =")
	}
	if shell, known := shells[program]; known {
		r.shell(cmd, prefix, shell, argvLiteral, reasons, hereDoc)
		return
	}
	check := checkProgram(program, argv, hereDoc)
	r.emit(cmd, append(reasons, check.reasons...))
	for _, run := range check.runs {
		r.listHidden(run, argvLiteral, cmd, check.reasons)
	}
}

// listHidden lists a command that another program runs (sudo's, xargs', find -exec's, the
// string eval runs), for deny rules. It carries the outer command's reasons: it never runs
// on its own as written.
func (r *commandReader) listHidden(run hiddenRun, outerLiteral []bool, outer SimpleCommand, reasons []string) {
	if run.script != "" {
		if r.shellDepth+1 > maxShellDepth || !allLiteral(outerLiteral) {
			return
		}
		inner := readSource(run.script, "bash", r.shellDepth+1, r.budget)
		for _, cmd := range inner.Commands {
			r.emit(cmd, append(slices.Clone(reasons), inner.Opaque...))
		}
		return
	}
	if len(run.argv) == 0 {
		return
	}
	literal := outerLiteral[len(outerLiteral)-len(run.argv)-run.trailing : len(outerLiteral)-run.trailing]
	r.finish(SimpleCommand{Argv: slices.Clone(run.argv), Assigns: outer.Assigns, Redirects: outer.Redirects}, literal, reasons, false)
}

func allLiteral(literal []bool) bool {
	return !slices.Contains(literal, false)
}

// shell reads `sh -c 'script'` as the commands of script, with the outer command's
// assignments, redirections and reasons carried onto each. Any other use of a shell (a
// file, stdin, an interactive or rc-reading option, a script that is not literal) is opaque.
func (r *commandReader) shell(cmd SimpleCommand, prefix wrapperPrefix, shell shellKind, literal []bool, reasons []string, hereDoc bool) {
	argv := cmd.Argv[prefix.start:]
	name := programBase(argv[0])
	invocation := readShellOptions(argv[1:])
	switch {
	case !systemProgram(argv[0]):
		// ./bash or /tmp/x/bash is whatever program was put there, which
		// need not run its -c script as a shell would: it is no shell the
		// rules can see through, though what its script names still meets
		// the deny rules.
		reasons = append(reasons, argv[0]+" is not a shell from a system directory")
	case hereDoc:
		reasons = append(reasons, "here-document into "+name)
	case invocation.problem != "":
		reasons = append(reasons, name+" "+invocation.problem)
	case invocation.script < 0:
		reasons = append(reasons, name+" without -c runs a file or stdin")
	case !shell.readable:
		reasons = append(reasons, "cannot read a "+name+" script")
	case !literal[1+invocation.script]:
		reasons = append(reasons, name+" -c with a non-literal script")
	case r.shellDepth+1 > maxShellDepth:
		reasons = append(reasons, "shells nested too deep")
	}
	if invocation.script < 0 || !shell.readable || !literal[1+invocation.script] || r.shellDepth+1 > maxShellDepth {
		r.emit(cmd, reasons)
		return
	}

	script := argv[1+invocation.script]
	inner := r.readShellScript(script, shell)
	if len(reasons) > 0 || len(inner.Opaque) > 0 || len(inner.Commands) == 0 {
		// The shell itself is listed, and what its script visibly runs too.
		r.emit(cmd, append(reasons, inner.Opaque...))
		for _, innerCmd := range inner.Commands {
			r.emit(carryOuter(innerCmd, cmd, prefix), append(slices.Clone(reasons), inner.Opaque...))
		}
		return
	}
	for _, innerCmd := range inner.Commands {
		r.emit(carryOuter(innerCmd, cmd, prefix), reasons)
	}
}

// carryOuter gives a command of a shell's script the environment and redirections of the
// command that started the shell.
func carryOuter(inner, outer SimpleCommand, prefix wrapperPrefix) SimpleCommand {
	inner.Assigns = slices.Concat(outer.Assigns, prefix.env, inner.Assigns)
	inner.Redirects = slices.Concat(outer.Redirects, inner.Redirects)
	inner.Opaque = slices.Clone(inner.Opaque)
	return inner
}

// readShellScript parses a shell's script. A POSIX shell, zsh or ksh script is also read as
// bash, and the two readings must agree: where the dialects differ ($'...' in dash, glob
// qualifiers in zsh) the reader cannot tell which one runs, so it is opaque.
func (r *commandReader) readShellScript(script string, shell shellKind) Script {
	asBash := readSource(script, "bash", r.shellDepth+1, r.budget)
	if shell.dialect == "bash" {
		return asBash
	}
	asOwn := readSource(script, shell.dialect, r.shellDepth+1, r.budget)
	if len(asOwn.Opaque) > 0 {
		asBash.Opaque = appendUnique(asBash.Opaque, asOwn.Opaque...)
	} else if !reflect.DeepEqual(asBash.Commands, asOwn.Commands) {
		asBash.Opaque = appendUnique(asBash.Opaque, "reads differently in "+shell.dialect+" and bash")
	}
	return asBash
}

type shellKind struct {
	readable bool   // its -c script is parsed
	dialect  string // the dialect its script is parsed in besides bash
}

// shellInvocation is what a shell's options say it will run.
type shellInvocation struct {
	script  int    // index in the arguments of the -c script, or -1 without -c
	problem string // an option that runs code from elsewhere or that is not understood
}

// Shell options that change nothing about which commands the script runs.
var (
	harmlessShellFlags = "abefhlmnpuvxBCEHPTt"
	harmlessSetOptions = map[string]bool{
		"errexit": true, "nounset": true, "pipefail": true, "xtrace": true, "verbose": true,
		"noglob": true, "noclobber": true, "noexec": true, "errtrace": true, "functrace": true,
		"posix": true, "braceexpand": true, "hashall": true, "notify": true, "monitor": true,
		"allexport": true, "physical": true, "privileged": true, "nolog": true,
	}
	harmlessShoptOptions = map[string]bool{
		"extglob": true, "globstar": true, "nullglob": true, "failglob": true,
		"lastpipe": true, "inherit_errexit": true,
	}
	harmlessLongShellOptions = map[string]bool{
		"--login": true, "--noprofile": true, "--norc": true, "--posix": true,
		"--noediting": true, "--verbose": true, "--restricted": true,
	}
)

// readShellOptions reads a shell's arguments as bash does: options first, then with -c the
// first operand is the script (and the rest are $0, $1, ...).
func readShellOptions(args []string) shellInvocation {
	hasC := false
	i := 0
	for ; i < len(args); i++ {
		arg := args[i]
		if arg == "--" || arg == "-" {
			i++
			break
		}
		if strings.HasPrefix(arg, "--") {
			if !harmlessLongShellOptions[arg] {
				return shellInvocation{script: -1, problem: arg}
			}
			continue
		}
		if len(arg) < 2 || (arg[0] != '-' && arg[0] != '+') {
			break
		}
		for _, flag := range arg[1:] {
			switch {
			case flag == 'c':
				hasC = true
			case flag == 'o' || flag == 'O':
				i++
				known := harmlessSetOptions
				if flag == 'O' {
					known = harmlessShoptOptions
				}
				if i >= len(args) || !known[args[i]] {
					return shellInvocation{script: -1, problem: "-" + string(flag) + " with an option that is not understood"}
				}
			case strings.ContainsRune(harmlessShellFlags, flag):
			default:
				return shellInvocation{script: -1, problem: "-" + string(flag)}
			}
		}
	}
	if !hasC || i >= len(args) {
		return shellInvocation{script: -1}
	}
	return shellInvocation{script: i}
}

// wrapperPrefix is what a run of wrapper programs at the start of an argv amounts to.
type wrapperPrefix struct {
	start   int      // index of the program the wrappers run; a wrapper itself if it runs nothing or cannot be read
	env     []string // NAME=VALUE operands given to env
	reasons []string // side effects of the wrappers, or why their options could not be read
}

// readWrappers strips wrappers that only run their arguments from the front of argv.
func readWrappers(argv []string) wrapperPrefix {
	var prefix wrapperPrefix
	for prefix.start < len(argv) {
		name := programKey(argv[prefix.start])
		readOptions, isWrapper := wrappers[name]
		if !isWrapper {
			break
		}
		result := readOptions(argv[prefix.start+1:])
		if result.problem != "" {
			prefix.reasons = append(prefix.reasons, result.problem)
		}
		prefix.reasons = append(prefix.reasons, result.effects...)
		prefix.env = append(prefix.env, result.env...)
		if result.problem != "" || result.command < 0 || prefix.start+1+result.command >= len(argv) {
			break
		}
		prefix.start += 1 + result.command
	}
	return prefix
}

// wrapperOptions is what a wrapper's arguments say.
type wrapperOptions struct {
	command int      // index in the arguments of the command it runs, or -1 if it runs none
	env     []string // NAME=VALUE operands (env)
	effects []string // things the wrapper does besides running the command
	problem string   // set when the options cannot be read
}

// longOptionNames maps the long options of the plain wrappers to their short forms.
var longOptionNames = map[string]string{
	"--ctty": "c", "--fork": "f", "--wait": "w", // setsid
	"--input": "i", "--output": "o", "--error": "e", // stdbuf
	"--class": "c", "--classdata": "n", "--ignore": "t", // ionice
}

// readPlainOptions reads options of the getopt kind: flags takes no argument, valued takes
// one (attached, or as the next argument). Anything else cannot be read.
func readPlainOptions(name string, args []string, flags, valued string) wrapperOptions {
	for i := 0; i < len(args); i++ {
		arg := args[i]
		switch {
		case arg == "--":
			return commandAt(i+1, args)
		case strings.HasPrefix(arg, "--"):
			long, _, hasValue := strings.Cut(arg, "=")
			short, known := longOptionNames[long]
			switch {
			case !known || !strings.Contains(flags+valued, short):
				return wrapperOptions{problem: "cannot read the options of " + name}
			case strings.Contains(valued, short) && !hasValue:
				i++
			case strings.Contains(flags, short) && hasValue:
				return wrapperOptions{problem: "cannot read the options of " + name}
			}
		case len(arg) > 1 && arg[0] == '-':
			for j := 1; j < len(arg); j++ {
				switch {
				case strings.IndexByte(flags, arg[j]) >= 0:
				case strings.IndexByte(valued, arg[j]) >= 0:
					if j == len(arg)-1 {
						i++
					}
					j = len(arg)
				default:
					return wrapperOptions{problem: "cannot read the options of " + name}
				}
			}
		default:
			return commandAt(i, args)
		}
	}
	return wrapperOptions{command: -1}
}

func commandAt(i int, args []string) wrapperOptions {
	if i >= len(args) {
		return wrapperOptions{command: -1}
	}
	return wrapperOptions{command: i}
}

func readEnvOptions(args []string) wrapperOptions {
	var result wrapperOptions
	problem := func(what string) wrapperOptions { return wrapperOptions{problem: what} }
	i := 0
options:
	for ; i < len(args); i++ {
		arg := args[i]
		long, _, hasValue := strings.Cut(arg, "=")
		switch {
		case arg == "--":
			i++
			break options
		case arg == "-":
			// The old spelling of -i.
		case long == "--ignore-environment" || long == "--null" || long == "--debug":
			if hasValue {
				return problem("cannot read the options of env")
			}
		case long == "--unset":
			if !hasValue {
				i++
			}
		case long == "--chdir":
			if !hasValue {
				i++
			}
			result.effects = append(result.effects, "env changes directory")
		case long == "--split-string":
			return problem("env -S")
		case strings.HasPrefix(arg, "--"):
			return problem("cannot read the options of env")
		case strings.HasPrefix(arg, "-"):
		cluster:
			for j := 1; j < len(arg); j++ {
				switch arg[j] {
				case 'i', '0', 'v':
				case 'u', 'C':
					if arg[j] == 'C' {
						result.effects = append(result.effects, "env changes directory")
					}
					if j == len(arg)-1 {
						i++ // the value is the next argument
					}
					break cluster
				case 'S':
					return problem("env -S")
				default:
					return problem("cannot read the options of env")
				}
			}
		default:
			break options
		}
	}
	for ; i < len(args) && strings.Contains(args[i], "="); i++ {
		result.env = append(result.env, args[i])
	}
	result.command = -1
	if i < len(args) {
		result.command = i
	}
	return result
}

func readCommandOptions(args []string) wrapperOptions {
	for i, arg := range args {
		switch {
		case arg == "--":
			return commandAt(i+1, args)
		case arg == "-p":
		case strings.HasPrefix(arg, "-") && len(arg) > 1:
			if strings.Trim(arg[1:], "pvV") != "" {
				return wrapperOptions{problem: "cannot read the options of command"}
			}
			// command -v and -V look a name up; they run nothing.
			return wrapperOptions{command: -1}
		default:
			return commandAt(i, args)
		}
	}
	return wrapperOptions{command: -1}
}

func readNiceOptions(args []string) wrapperOptions {
	for i := 0; i < len(args); i++ {
		arg := args[i]
		switch {
		case arg == "--":
			return commandAt(i+1, args)
		case arg == "-n" || arg == "--adjustment":
			i++
		case strings.HasPrefix(arg, "--adjustment="):
		case strings.HasPrefix(arg, "-n") && isDecimal(arg[2:]):
		case strings.HasPrefix(arg, "-") && isDecimal(arg[1:]):
		case strings.HasPrefix(arg, "-") && len(arg) > 1:
			return wrapperOptions{problem: "cannot read the options of nice"}
		default:
			return commandAt(i, args)
		}
	}
	return wrapperOptions{command: -1}
}

func readTimeoutOptions(args []string) wrapperOptions {
	for i := 0; i < len(args); i++ {
		arg := args[i]
		switch {
		case arg == "--":
			i++
			if i >= len(args) {
				return wrapperOptions{problem: "cannot read the options of timeout"}
			}
			return commandAt(i+1, args)
		case arg == "-s" || arg == "--signal" || arg == "-k" || arg == "--kill-after":
			i++
		case strings.HasPrefix(arg, "--signal="), strings.HasPrefix(arg, "--kill-after="),
			strings.HasPrefix(arg, "-s"), strings.HasPrefix(arg, "-k"):
		case arg == "--preserve-status" || arg == "--foreground" || arg == "--verbose" ||
			arg == "-v" || arg == "-p" || arg == "-f":
		case strings.HasPrefix(arg, "-") && len(arg) > 1:
			return wrapperOptions{problem: "cannot read the options of timeout"}
		default:
			// The duration; the command follows it.
			return commandAt(i+1, args)
		}
	}
	return wrapperOptions{problem: "cannot read the options of timeout"}
}

func readTimeOptions(args []string) wrapperOptions {
	var effects []string
	for i := 0; i < len(args); i++ {
		arg := args[i]
		switch {
		case arg == "--":
			result := commandAt(i+1, args)
			result.effects = effects
			return result
		case arg == "-p" || arg == "--portability" || arg == "-v" || arg == "--verbose" ||
			arg == "-q" || arg == "--quiet" || arg == "-a" || arg == "--append":
		case arg == "-f" || arg == "--format":
			i++
		case strings.HasPrefix(arg, "--format="):
		case arg == "-o" || arg == "--output" || strings.HasPrefix(arg, "--output="):
			if !strings.Contains(arg, "=") {
				i++
			}
			// GNU time writes its report to this file: a write no redirection shows.
			effects = append(effects, "time -o writes a file")
		case strings.HasPrefix(arg, "-") && len(arg) > 1:
			return wrapperOptions{problem: "cannot read the options of time"}
		default:
			result := commandAt(i, args)
			result.effects = effects
			return result
		}
	}
	return wrapperOptions{command: -1, effects: effects}
}

func readChrtOptions(args []string) wrapperOptions {
	for i := 0; i < len(args); i++ {
		arg := args[i]
		switch {
		case arg == "-p" || arg == "--pid" || arg == "-m" || arg == "--max":
			return wrapperOptions{command: -1} // acts on a running process, or prints
		case arg == "-T" || arg == "-P" || arg == "-D" ||
			arg == "--sched-runtime" || arg == "--sched-period" || arg == "--sched-deadline":
			i++
		case strings.HasPrefix(arg, "--sched-"):
		case strings.HasPrefix(arg, "--"):
			switch arg {
			case "--all-tasks", "--batch", "--deadline", "--ext", "--fifo", "--idle", "--other", "--rr", "--reset-on-fork", "--verbose":
			default:
				return wrapperOptions{problem: "cannot read the options of chrt"}
			}
		case strings.HasPrefix(arg, "-") && len(arg) > 1:
			if strings.Trim(arg[1:], "abdefioRrv") != "" {
				return wrapperOptions{problem: "cannot read the options of chrt"}
			}
		case isDecimal(arg):
			return commandAt(i+1, args) // the priority; the command follows it
		default:
			return wrapperOptions{problem: "cannot read the options of chrt"}
		}
	}
	return wrapperOptions{command: -1}
}

func readBusyboxOptions(args []string) wrapperOptions {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return wrapperOptions{command: -1}
	}
	return wrapperOptions{command: 0}
}

// systemDirectories hold the programs the system installed, which only an
// administrator can replace: a shell found there is the shell its name says.
var systemDirectories = []string{
	"/bin", "/usr/bin", "/usr/local/bin", "/sbin", "/usr/sbin", "/usr/local/sbin",
	"/opt/homebrew/bin", "/run/current-system/sw/bin",
}

// systemProgram reports whether a program is looked up on PATH (a bare name,
// which the agent's environment resolves) or named by its clean path in a
// system directory.
func systemProgram(program string) bool {
	program = strings.TrimLeft(program, "=")
	if !strings.Contains(program, "/") {
		return true
	}
	dir, _ := filepath.Split(program)
	return filepath.Clean(program) == program && slices.Contains(systemDirectories, filepath.Clean(dir))
}

// programBase is a program's name without its directory: /usr/bin/git and ./git are git.
// A leading = is zsh's spelling of the same program.
func programBase(program string) string {
	base := program[strings.LastIndexByte(program, '/')+1:]
	if trimmed := strings.TrimLeft(base, "="); trimmed != "" {
		return trimmed
	}
	return base
}

// programKey is the name programs are recognised by. It ignores case, as macOS's file
// system does: /bin/BASH is bash there.
func programKey(program string) string {
	return strings.ToLower(programBase(program))
}

// hiddenRun is a command another program runs: an argv that ends trailing words before the
// end of the outer argv, or a shell script.
type hiddenRun struct {
	argv     []string
	trailing int
	script   string
}

// programCheck is what a program's name and arguments say about what it runs.
type programCheck struct {
	reasons []string
	runs    []hiddenRun
}

// versionDigits are what a version suffix is made of (python3.12, perl5.36).
const versionDigits = "0123456789."

// isPythonName reports whether a program name is python or pypy with a
// version suffix or none: python, python3, pypy3.10. Every program name is
// asked, so it is compared by hand rather than with a regexp.
func isPythonName(program string) bool {
	for _, name := range []string{"python", "pypy"} {
		if rest, ok := strings.CutPrefix(program, name); ok && strings.TrimLeft(rest, versionDigits) == "" {
			return true
		}
	}
	return false
}

// interpreter describes a program that runs code given on its command line or on stdin.
type interpreter struct {
	shortFlags string   // option letters whose argument (or the rest of the cluster) is code, or that read code from stdin
	longFlags  []string // long options that take code
	valued     []string // options that take a separate argument that is not the script
	info       []string // options that print something and exit, besides --version and --help
}

// interpreterOf returns the interpreter a program name names, allowing version suffixes
// (python3.12, perl5.36, php8.2, lua5.4).
func interpreterOf(program string) (string, interpreter, bool) {
	if isPythonName(program) {
		return "python", interpreters["python"], true
	}
	if program == "nodejs" {
		program = "node"
	}
	for _, name := range []string{program, strings.TrimRight(program, versionDigits)} {
		if spec, ok := interpreters[name]; ok {
			return name, spec, true
		}
	}
	return "", interpreter{}, false
}

// checkProgram says what a program that is not a shell or a wrapper runs besides itself.
func checkProgram(program string, argv []string, hereDoc bool) programCheck {
	args := argv[1:]
	var check programCheck
	opaque := func(reason string) { check.reasons = append(check.reasons, reason) }
	switch program {
	case "eval":
		opaque("eval")
		check.runs = append(check.runs, hiddenRun{script: strings.Join(args, " ")})
	case "source", ".":
		opaque("source")
	case "exec":
		opaque("exec")
		if run, ok := runAfterOptions(args, "cl", "a"); ok {
			check.runs = append(check.runs, run)
		}
	case "trap":
		opaque("trap")
		if len(args) > 0 && args[0] == "--" {
			args = args[1:]
		}
		if len(args) > 1 && !strings.HasPrefix(args[0], "-") {
			check.runs = append(check.runs, hiddenRun{script: args[0]})
		}
	case "alias", "enable", "fc", "compgen", "complete", "setopt", "unsetopt":
		opaque(program)
	case "shopt":
		// dotglob and nocaseglob let a glob reach names a path check does not see.
		for _, arg := range args {
			if !strings.HasPrefix(arg, "-") && !harmlessShoptOptions[arg] {
				opaque("shopt " + arg)
			}
		}
	case "hash":
		if slices.ContainsFunc(args, func(arg string) bool { return strings.HasPrefix(arg, "-p") }) {
			opaque("hash -p")
		}
	case "set":
		for i, arg := range args {
			if (strings.HasPrefix(arg, "-") && !strings.HasPrefix(arg, "--") && strings.Contains(arg, "k")) ||
				(arg == "keyword" && i > 0 && (args[i-1] == "-o" || args[i-1] == "+o")) {
				// Every NAME=VALUE argument becomes an assignment.
				opaque("set -k")
			}
		}
	case "declare", "typeset", "local", "export", "readonly", "nameref":
		check.reasons = append(check.reasons, declarationReasons(program, args)...)
	case "unset", "read", "mapfile", "readarray", "getopts", "wait", "test", "[":
		// These evaluate the subscript of a variable name they are given, running any
		// substitution in it: read 'a[$(rm x)]'.
		if slices.ContainsFunc(args, evaluatesAsName) {
			opaque(program + " evaluates a variable name")
		}
		if (program == "test" || program == "[") && (slices.Contains(args, "-v") || slices.Contains(args, "-R")) {
			opaque(program + " evaluates a variable name")
		}
		if (program == "mapfile" || program == "readarray") && slices.ContainsFunc(args, func(arg string) bool { return strings.HasPrefix(arg, "-C") }) {
			opaque(program + " -C runs a callback")
		}
	case "let":
		opaque("let")
	case "printf":
		if slices.ContainsFunc(args, func(arg string) bool { return strings.HasPrefix(arg, "-v") }) && slices.ContainsFunc(args, evaluatesAsName) {
			opaque("printf evaluates a variable name")
		}
	case "xargs":
		opaque("xargs")
		if run, ok := xargsCommand(args); ok {
			check.runs = append(check.runs, run)
		}
	case "find":
		check = checkFind(args)
	case "sudo", "doas", "su", "pkexec", "run0":
		opaque(program)
		check.runs = append(check.runs, privilegedCommand(program, args)...)
	case "watch":
		opaque("watch")
		check.runs = append(check.runs, watchCommand(args)...)
	case "awk", "gawk", "mawk", "nawk":
		check.reasons = append(check.reasons, awkReasons(program, args)...)
	case "sed", "gsed":
		check.reasons = append(check.reasons, sedReasons(program, args)...)
	case "git":
		check.reasons = append(check.reasons, gitReasons(args)...)
	default:
		check.reasons = append(check.reasons, commandOptionReasons(program, args)...)
	}
	if name, spec, ok := interpreterOf(program); ok {
		check.reasons = append(check.reasons, interpreterReasons(name, spec, args, hereDoc)...)
	}
	return check
}

// evaluatesAsName reports an argument that, used as a variable name, would have a
// subscript or expansion evaluated.
func evaluatesAsName(arg string) bool {
	return strings.ContainsAny(arg, "$`[")
}

func declarationReasons(program string, args []string) []string {
	var reasons []string
	for _, arg := range args {
		if strings.HasPrefix(arg, "-") || strings.HasPrefix(arg, "+") {
			if strings.ContainsAny(arg[1:], "in") {
				// Integer variables evaluate what is assigned to them; namerefs
				// evaluate the name they point to.
				reasons = append(reasons, program+" "+arg[:1]+"i/n evaluates values")
			}
			continue
		}
		// The name's subscript is evaluated (declare 'a[$(rm x)]=1' runs rm); the value
		// is only evaluated for -i, which is opaque above.
		name, _, _ := strings.Cut(arg, "=")
		name = strings.TrimSuffix(name, "+")
		reasons = append(reasons, dangerousVariable(name)...)
		if evaluatesAsName(name) {
			reasons = append(reasons, program+" evaluates a variable name")
		}
	}
	return reasons
}

// runAfterOptions returns the command after a program's options, flags taking no argument
// and valued taking one.
func runAfterOptions(args []string, flags, valued string) (hiddenRun, bool) {
	result := readPlainOptions("", args, flags, valued)
	if result.problem != "" || result.command < 0 {
		return hiddenRun{}, false
	}
	return hiddenRun{argv: args[result.command:]}, true
}

func xargsCommand(args []string) (hiddenRun, bool) {
	valuedLong := map[string]bool{
		"--arg-file": true, "--delimiter": true, "--eof": true, "--max-lines": true, "--max-args": true,
		"--max-procs": true, "--max-chars": true, "--process-slot-var": true, "--replace": true,
	}
	for i := 0; i < len(args); i++ {
		arg := args[i]
		switch {
		case arg == "--":
			if i+1 < len(args) {
				return hiddenRun{argv: args[i+1:]}, true
			}
			return hiddenRun{}, false
		case strings.HasPrefix(arg, "--"):
			long, _, hasValue := strings.Cut(arg, "=")
			if valuedLong[long] && !hasValue && long != "--replace" && long != "--eof" {
				i++
			}
		case len(arg) > 1 && arg[0] == '-':
			flag := arg[1]
			switch {
			case strings.IndexByte("adEILnPs", flag) >= 0:
				if len(arg) == 2 {
					i++
				}
			case strings.IndexByte("0oprtxeil", flag) >= 0:
			default:
				return hiddenRun{}, false
			}
		default:
			return hiddenRun{argv: args[i:]}, true
		}
	}
	return hiddenRun{}, false
}

// checkFind marks the find actions that run a command or write a file, and lists the
// commands -exec runs.
func checkFind(args []string) programCheck {
	var check programCheck
	for i := 0; i < len(args); i++ {
		switch action := args[i]; action {
		case "-exec", "-execdir", "-ok", "-okdir":
			check.reasons = appendUnique(check.reasons, "find "+action)
			end := i + 1
			for end < len(args) && args[end] != ";" && args[end] != "+" {
				end++
			}
			if end > i+1 {
				check.runs = append(check.runs, hiddenRun{argv: args[i+1 : end], trailing: len(args) - end})
			}
			i = end
		case "-fprint", "-fprint0", "-fprintf", "-fls":
			// findWriters: what the file names is a destination too.
			check.reasons = appendUnique(check.reasons, "find "+action+" writes a file")
		}
	}
	return check
}

// privilegedCommand lists what sudo and its kin run, when their options can be read.
func privilegedCommand(program string, args []string) []hiddenRun {
	switch program {
	case "su":
		for i, arg := range args {
			if (arg == "-c" || arg == "--command" || arg == "--session-command") && i+1 < len(args) {
				return []hiddenRun{{script: args[i+1]}}
			}
			if value, ok := strings.CutPrefix(arg, "--command="); ok {
				return []hiddenRun{{script: value}}
			}
		}
		return nil
	case "doas":
		if run, ok := runAfterOptions(args, "nsL", "uC"); ok {
			return []hiddenRun{run}
		}
	case "sudo":
		for i := 0; i < len(args); i++ {
			arg := args[i]
			switch {
			case arg == "--":
				if i+1 < len(args) {
					return []hiddenRun{{argv: args[i+1:]}}
				}
				return nil
			case strings.HasPrefix(arg, "--"):
				long, _, hasValue := strings.Cut(arg, "=")
				switch long {
				case "--user", "--group", "--close-from", "--chdir", "--host", "--prompt", "--role", "--type", "--command-timeout", "--other-user":
					if !hasValue {
						i++
					}
				}
			case len(arg) > 1 && arg[0] == '-':
				for j := 1; j < len(arg); j++ {
					if strings.IndexByte("ugCDhprtTU", arg[j]) >= 0 {
						if j == len(arg)-1 {
							i++
						}
						break
					}
				}
			default:
				return []hiddenRun{{argv: args[i:]}}
			}
		}
	default: // pkexec, run0
		for i, arg := range args {
			if !strings.HasPrefix(arg, "-") {
				if i > 0 && (args[i-1] == "--user" || args[i-1] == "-u") {
					continue
				}
				return []hiddenRun{{argv: args[i:]}}
			}
		}
	}
	return nil
}

// watchCommand lists what watch runs: its arguments joined into a sh -c script, or with
// -x the argv itself.
func watchCommand(args []string) []hiddenRun {
	direct := false
	for i := 0; i < len(args); i++ {
		arg := args[i]
		switch {
		case arg == "-n" || arg == "--interval" || arg == "-q" || arg == "--equexit":
			i++
		case arg == "-x" || arg == "--exec":
			direct = true
		case strings.HasPrefix(arg, "-"):
			if arg == "--" {
				i++
			}
			if arg != "--" {
				continue
			}
			fallthrough
		default:
			if i >= len(args) {
				return nil
			}
			if direct {
				return []hiddenRun{{argv: args[i:]}}
			}
			return []hiddenRun{{script: strings.Join(args[i:], " ")}}
		}
	}
	return nil
}

// awkReasons marks awk programs that can run commands or write files: system(), pipes,
// getline from a command, output redirection, program files and extensions loaded from
// elsewhere, and gawk's options that write a file (-o/-p/-d with a file name). Long
// options count cut short too (`--fi` is gawk's --file), and short ones inside a cluster
// (`-bf x.awk`).
func awkReasons(program string, args []string) []string {
	runsFile := []string{program + " runs a program file"}
	var code []string
	operandSeen := false
	long := func(arg string, names ...string) bool {
		return slices.ContainsFunc(names, func(n string) bool { return abbreviates(arg, n) })
	}
	for i := 0; i < len(args); i++ {
		arg := args[i]
		_, value, hasValue := strings.Cut(arg, "=")
		switch {
		case arg == "--":
			if i+1 < len(args) && !operandSeen {
				code = append(code, args[i+1])
			}
			i = len(args)
		case long(arg, "--file", "--include", "--load", "--exec"):
			return runsFile
		case long(arg, "--source"):
			if hasValue {
				code = append(code, value)
			} else if i+1 < len(args) {
				i++
				code = append(code, args[i])
			}
			operandSeen = true
		case long(arg, "--dump-variables", "--pretty-print", "--profile", "--debug") && hasValue:
			return []string{program + " " + arg + " writes or reads a file"}
		case long(arg, "--assign", "--field-separator") && !hasValue:
			i++
		case strings.HasPrefix(arg, "--"):
		case len(arg) > 1 && arg[0] == '-':
		cluster:
			for j := 1; j < len(arg); j++ {
				rest := arg[j+1:]
				switch c := arg[j]; {
				case strings.IndexByte("filE", c) >= 0:
					return runsFile
				case c == 'W' || c == 'D':
					// -W exec=file, -W source=code; -D reads debugger commands.
					return []string{program + " -" + string(c)}
				case strings.IndexByte("dop", c) >= 0 && rest != "":
					return []string{program + " -" + string(c) + " writes a file"}
				case c == 'e':
					if rest == "" && i+1 < len(args) {
						i++
						rest = args[i]
					}
					code = append(code, rest)
					operandSeen = true
					break cluster
				case strings.IndexByte("FvLZ", c) >= 0:
					if rest == "" {
						i++
					}
					break cluster
				}
			}
		default:
			if !operandSeen {
				code = append(code, arg)
			}
			i = len(args)
		}
	}
	for _, text := range code {
		if strings.Contains(text, "system") || strings.ContainsAny(text, "|>@") || strings.Contains(text, "getline") {
			return []string{program + " program can run commands or write files"}
		}
	}
	return nil
}

// interpreterReasons marks an interpreter that runs code from its command line or from
// stdin, where rules cannot see it.
func interpreterReasons(name string, spec interpreter, args []string, hereDoc bool) []string {
	if hereDoc {
		return []string{"here-document into " + name}
	}
	hasScript, printsInfo := false, false
	for i := 0; i < len(args) && !hasScript; i++ {
		arg := args[i]
		flag, _, _ := strings.Cut(arg, "=")
		switch {
		case slices.Contains(spec.longFlags, flag):
			return []string{name + " " + flag}
		case arg == "-" || arg == "--":
			return []string{name + " reads code from stdin"}
		case slices.Contains(spec.valued, arg):
			// -m names a module: that is the code that runs, like a script.
			hasScript = arg == "-m"
			i++
		case arg == "--version" || arg == "--help" || slices.Contains(spec.info, arg):
			printsInfo = true
		case strings.HasPrefix(arg, "--"):
		case strings.HasPrefix(arg, "-"):
			if at := strings.IndexAny(arg[1:], spec.shortFlags); at >= 0 {
				return []string{name + " -" + arg[1+at:2+at]}
			}
		default:
			hasScript = true
		}
	}
	if !hasScript && !printsInfo {
		return []string{name + " reads code from stdin"}
	}
	return nil
}

func commandOptionReasons(program string, args []string) []string {
	spec, ok := commandOptions[program]
	if !ok {
		return nil
	}
	for i, arg := range args {
		if arg == "--" {
			break
		}
		if spec.has(arg) {
			name, _, _ := strings.Cut(arg, "=")
			return []string{program + " " + name + " runs a command"}
		}
		// tar's old style: a first argument without the dash is a cluster
		// of options (`tar xIf ./evil p.tar`).
		if program == "tar" && i == 0 && !strings.HasPrefix(arg, "-") && strings.ContainsAny(arg, spec.short) {
			return []string{"tar " + arg + " runs a command"}
		}
		// ssh's ProxyCommand and LocalCommand run locally, whatever the host runs.
		if (program == "ssh" || program == "scp" || program == "sftp") && strings.HasPrefix(arg, "-o") {
			option := strings.TrimPrefix(arg, "-o")
			if option == "" && i+1 < len(args) {
				option = args[i+1]
			}
			option = strings.ToLower(strings.TrimSpace(option))
			for _, runs := range []string{"proxycommand", "localcommand", "permitlocalcommand", "knownhostscommand", "match"} {
				if strings.HasPrefix(option, runs) {
					return []string{program + " -o " + runs + " runs a command"}
				}
			}
		}
	}
	return nil
}

// gitReasons marks git invocations that run a command line of their choosing or write a
// file outside the repository's own machinery: configuration given on the command line
// (core.pager, alias.*, core.sshCommand all run commands), and the options and
// subcommands made to run commands.
func gitReasons(args []string) []string {
	i := 0
	for ; i < len(args); i++ {
		arg := args[i]
		switch {
		case arg == "-c" || arg == "--config-env" || strings.HasPrefix(arg, "--config-env=") ||
			(strings.HasPrefix(arg, "-c") && !strings.HasPrefix(arg, "--")):
			return []string{"git -c sets configuration that can run commands"}
		case strings.HasPrefix(arg, "--exec-path="):
			return []string{"git --exec-path"}
		case arg == "-C" || arg == "--git-dir" || arg == "--work-tree" || arg == "--namespace" || arg == "--super-prefix" || arg == "--attr-source":
			i++
		case strings.HasPrefix(arg, "-"):
		default:
			return gitSubcommandReasons(arg, args[i+1:])
		}
	}
	return nil
}

func gitSubcommandReasons(subcommand string, args []string) []string {
	for i, arg := range args {
		if arg == "--" {
			break
		}
		for _, long := range gitRunningOptions {
			if strings.HasPrefix(arg, long) || abbreviates(arg, long) {
				return []string{"git " + subcommand + " " + long + " runs a command or writes a file"}
			}
		}
		if letters, ok := gitSubcommandRunners[subcommand]; ok && len(arg) > 1 && arg[0] == '-' && arg[1] != '-' {
			if at := strings.IndexAny(arg[1:], letters); at >= 0 {
				return []string{"git " + subcommand + " -" + arg[1+at:2+at] + " runs a command or sets configuration"}
			}
		}
		if i == 0 && ((subcommand == "submodule" && arg == "foreach") || (subcommand == "bisect" && arg == "run")) {
			return []string{"git " + subcommand + " " + arg + " runs a command"}
		}
	}
	if subcommand == "filter-branch" {
		return []string{"git filter-branch runs commands"}
	}
	return nil
}

// sedReasons marks sed scripts that run a command (GNU sed's e command and s///e flag) or
// write a file (w, W and s///w), and scripts it cannot read. --sandbox forbids all three.
func sedReasons(program string, args []string) []string {
	var scripts []string
	var operands []int
	fromOptions, sandboxed := false, false
	bsdSuffix := -1 // where BSD sed's `-i ''` suffix would be
	for i := 0; i < len(args); i++ {
		arg := args[i]
		long, value, hasValue := strings.Cut(arg, "=")
		switch {
		case arg == "--":
			for i++; i < len(args); i++ {
				operands = append(operands, i)
			}
		case long == "--sandbox":
			sandboxed = true
		case abbreviates(arg, "--expression"):
			fromOptions = true
			if hasValue {
				scripts = append(scripts, value)
			} else if i+1 < len(args) {
				i++
				scripts = append(scripts, args[i])
			}
		case abbreviates(arg, "--file"):
			return []string{program + " runs a script file"}
		case abbreviates(arg, "--line-length") && !hasValue:
			i++
		case strings.HasPrefix(arg, "--"):
		case len(arg) > 1 && arg[0] == '-':
		cluster:
			for j := 1; j < len(arg); j++ {
				switch arg[j] {
				case 'e', 'f', 'l':
					rest := arg[j+1:]
					if rest == "" && i+1 < len(args) {
						i++
						rest = args[i]
					}
					switch arg[j] {
					case 'f':
						return []string{program + " runs a script file"}
					case 'e':
						fromOptions = true
						scripts = append(scripts, rest)
					}
					break cluster
				case 'i':
					// GNU sed takes the rest of the cluster as a backup suffix; BSD sed
					// takes the next argument.
					if j == len(arg)-1 {
						bsdSuffix = i + 1
					}
					break cluster
				}
			}
		default:
			operands = append(operands, i)
		}
	}
	if !fromOptions && len(operands) > 0 {
		// GNU sed's script is the first operand; after `-i ''` BSD sed's is the next one.
		// Both are read.
		scripts = append(scripts, args[operands[0]])
		if operands[0] == bsdSuffix && len(operands) > 1 {
			scripts = append(scripts, args[operands[1]])
		}
	}
	if sandboxed {
		return nil
	}
	for _, script := range scripts {
		if problem := sedScriptProblem(script); problem != "" {
			return []string{program + " " + problem}
		}
	}
	return nil
}

// sedScriptProblem reads a sed script command by command and reports a command that runs
// something or writes a file, or a script it cannot read.
func sedScriptProblem(script string) string {
	i := 0
	skipTo := func(stops string) {
		for i < len(script) && strings.IndexByte(stops, script[i]) < 0 {
			if script[i] == '\\' {
				i++
			}
			i++
		}
	}
	// delimited skips a part ended by delim, such as /regex/, honouring backslashes.
	delimited := func(delim byte) bool {
		for ; i < len(script); i++ {
			switch script[i] {
			case '\\':
				i++
			case delim:
				i++
				return true
			}
		}
		return false
	}
	address := func() bool {
		switch {
		case i < len(script) && script[i] == '/':
			i++
			if !delimited('/') {
				return false
			}
		case i+1 < len(script) && script[i] == '\\':
			delim := script[i+1]
			i += 2
			if !delimited(delim) {
				return false
			}
		default:
			for i < len(script) && strings.IndexByte("0123456789$~+", script[i]) >= 0 {
				i++
			}
		}
		for i < len(script) && (script[i] == 'I' || script[i] == 'M') {
			i++
		}
		return true
	}
	for i < len(script) {
		c := script[i]
		if strings.IndexByte(" \t\n;{}", c) >= 0 {
			i++
			continue
		}
		if c == '#' {
			skipTo("\n")
			continue
		}
		if !address() {
			return "script cannot be read"
		}
		if i < len(script) && script[i] == ',' {
			i++
			if !address() {
				return "script cannot be read"
			}
		}
		for i < len(script) && (script[i] == ' ' || script[i] == '!') {
			i++
		}
		if i >= len(script) {
			return "script cannot be read"
		}
		command := script[i]
		i++
		switch command {
		case '{', '}', '=', 'd', 'D', 'g', 'G', 'h', 'H', 'n', 'N', 'p', 'P', 'x', 'z', 'F':
		case 'l', 'L', 'q', 'Q':
			for i < len(script) && (script[i] == ' ' || (script[i] >= '0' && script[i] <= '9')) {
				i++
			}
		case ':', 'b', 't', 'T', 'v':
			skipTo(";\n")
		case 'a', 'i', 'c', 'r', 'R':
			skipTo("\n")
		case 'e':
			return "e runs a command"
		case 'w', 'W':
			return string(command) + " writes a file"
		case 's', 'y':
			if i >= len(script) || script[i] == '\n' || script[i] == '\\' {
				return "script cannot be read"
			}
			delim := script[i]
			i++
			// Two delimited parts follow: s/pattern/replacement/ and
			// y/source/dest/; each call reads one.
			for range 2 {
				if !delimited(delim) {
					return "script cannot be read"
				}
			}
			for ; command == 's' && i < len(script) && strings.IndexByte(";\n} #", script[i]) < 0; i++ {
				switch script[i] {
				case 'e':
					return "s///e runs a command"
				case 'w':
					return "s///w writes a file"
				}
			}
		default:
			return "script cannot be read"
		}
	}
	return ""
}
