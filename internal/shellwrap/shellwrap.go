// Package shellwrap recognizes a command that does nothing but start a shell
// on a literal script: `/bin/bash -lc 'git status && ls'` as a string, or
// ["/bin/bash", "-lc", "git status && ls"] as an argv. Agents announce a
// command in one form and adapters strip the shell in another (codex-acp
// 2.6 announces a started command with its `bash -lc` and asks about it
// without), so the two must be seen to agree, and nothing else may.
//
// The reading is narrow on purpose: a form it does not recognize exactly
// is no wrapper, and two forms that differ then disagree.
package shellwrap

import (
	"encoding/json"
	"strings"
	"unicode/utf8"

	"mvdan.cc/sh/v3/syntax"
)

// shells are the shells whose -c script the broker's rules read through
// (rules/programs.go); a test checks that rules reads each.
var shells = map[string]bool{
	"bash": true, "rbash": true, "sh": true, "dash": true, "ash": true, "zsh": true,
	"ksh": true, "mksh": true, "pdksh": true, "oksh": true, "ksh93": true,
}

// scriptFlags are the only options a wrapper may give its shell.
var scriptFlags = map[string]bool{"-c": true, "-lc": true}

// maxCommand bounds what is parsed; rules never allow a longer command.
const maxCommand = 16 << 10

// Script returns the script of a command, a JSON string or argv array, that
// is exactly a shell, -c or -lc, and one non-empty literal script that is no
// option: no variable, substitution, glob or brace in any word, no
// assignment, redirection or other command beside it, no argument after
// the script.
func Script(command json.RawMessage) (string, bool) {
	var s string
	var argv []string
	switch {
	case json.Unmarshal(command, &s) == nil:
		return StringScript(s)
	case json.Unmarshal(command, &argv) == nil:
		return ArgvScript(argv)
	}
	return "", false
}

// StringScript is Script of a command string, read as bash reads it.
func StringScript(command string) (string, bool) {
	if len(command) > maxCommand || !exact(command) {
		return "", false
	}
	argv, ok := literalWords(command)
	if !ok {
		return "", false
	}
	return ArgvScript(argv)
}

// ArgvScript is Script of an argv, whose words execve takes as they are.
func ArgvScript(argv []string) (string, bool) {
	if len(argv) != 3 || !shells[base(argv[0])] || !scriptFlags[argv[1]] {
		return "", false
	}
	for _, arg := range argv {
		if !exact(arg) {
			return "", false
		}
	}
	script := argv[2]
	if script == "" || strings.HasPrefix(script, "-") || strings.HasPrefix(script, "+") {
		// The shell would read it as an option, not as its script.
		return "", false
	}
	return script, true
}

// Wraps reports whether wrapper is a shell started on exactly the script
// command, a JSON string, byte for byte after the shell's unquoting.
func Wraps(wrapper, command json.RawMessage) bool {
	var s string
	if json.Unmarshal(command, &s) != nil || !exact(s) {
		return false
	}
	script, ok := Script(wrapper)
	return ok && script == s
}

// exact reports whether a decoded string is what was sent: JSON decoding
// turns invalid UTF-8 and lone surrogates into U+FFFD, so two different
// strings could decode alike; and a NUL cuts what a shell or execve reads.
func exact(s string) bool {
	return !strings.ContainsRune(s, utf8.RuneError) && !strings.ContainsRune(s, 0)
}

func base(program string) string { return program[strings.LastIndexByte(program, '/')+1:] }

// literalWords reads src as bash would read one simple command and returns
// its words after quote removal, or false when src is anything more.
func literalWords(src string) ([]string, bool) {
	file, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(src), "")
	if err != nil || len(file.Stmts) != 1 {
		return nil, false
	}
	stmt := file.Stmts[0]
	call, ok := stmt.Cmd.(*syntax.CallExpr)
	if !ok || stmt.Negated || stmt.Background || stmt.Coprocess || stmt.Disown || len(stmt.Redirs) > 0 || len(call.Assigns) > 0 {
		return nil, false
	}
	words := make([]string, 0, len(call.Args))
	for _, w := range call.Args {
		value, ok := literal(w)
		if !ok {
			return nil, false
		}
		words = append(words, value)
	}
	return words, true
}

// literal is a word's value after quote removal when no expansion of any
// kind can change it.
func literal(w *syntax.Word) (string, bool) {
	var sb strings.Builder
	for _, part := range w.Parts {
		switch part := part.(type) {
		case *syntax.Lit:
			if !unquoted(&sb, part.Value) {
				return "", false
			}
		case *syntax.SglQuoted:
			if part.Dollar {
				return "", false
			}
			sb.WriteString(part.Value)
		case *syntax.DblQuoted:
			if part.Dollar {
				return "", false
			}
			for _, inner := range part.Parts {
				lit, ok := inner.(*syntax.Lit)
				if !ok || !doubleQuoted(&sb, lit.Value) {
					return "", false
				}
			}
		default:
			return "", false
		}
	}
	return sb.String(), true
}

// unquoted writes an unquoted literal with its backslash escapes removed;
// false when a character bash may expand (a glob, a brace, a tilde) is left
// unescaped.
func unquoted(sb *strings.Builder, s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\':
			if i+1 == len(s) || s[i+1] == '\n' {
				return false
			}
			i++
			sb.WriteByte(s[i])
		case strings.IndexByte("*?[]{}~", c) >= 0:
			return false
		default:
			sb.WriteByte(c)
		}
	}
	return true
}

// doubleQuoted writes a double-quoted literal with the backslashes that
// escape $ ` " \ removed, as bash does; false for a line continuation.
func doubleQuoted(sb *strings.Builder, s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			switch s[i+1] {
			case '\n':
				return false
			case '$', '`', '"', '\\':
				i++
			}
		}
		sb.WriteByte(s[i])
	}
	return true
}
