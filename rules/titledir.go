package rules

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
)

// Gemini CLI runs a shell call in the directory the model names (the
// dir_path of its run_shell_command: relative to the session's directory,
// or absolute, anywhere in its workspace or its own temporary directory),
// and its permission request, which has no rawInput, says so only in its
// text content: "[in DIR]", then " (description)" and " [background]"
// when they apply (gemini-cli 0.61, ShellToolInvocation.getContextualDetails).
// Without a dir_path the text is "[current working directory D]", D being
// gemini-cli's own process directory, and the command runs in the
// session's directory.
const statedDirPrefix = "[in "

// statedDirFrom is the source a stated directory is reported from.
const statedDirFrom = `content "[in DIR]"`

// readStatedDir reads the directory a request whose command is its title
// says the command runs in, into r.Dir. It reports whether the request
// states one. The model chooses both the directory and the description
// after it, so a statement is read the one way it can be: a text in which
// the directory's end cannot be told (see statedDir) is not understood, and
// two different statements are a conflict.
func (r *Request) readStatedDir(fields map[string]json.RawMessage) bool {
	var content []struct {
		Type    string `json:"type"`
		Content *struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	}
	if raw, ok := fields["content"]; !ok || json.Unmarshal(raw, &content) != nil {
		return false // readPaths reports content that is not a list
	}
	var stated []string
	for _, c := range content {
		if c.Type != "content" || c.Content == nil || c.Content.Type != "text" {
			continue
		}
		rest, ok := strings.CutPrefix(c.Content.Text, statedDirPrefix)
		if !ok {
			continue
		}
		dir, problem := statedDir(rest, r.ctx.Cwd)
		if problem != "" {
			r.notUnderstood("the directory in %q %s", c.Content.Text, problem)
			return false
		}
		stated = append(stated, dir)
	}
	if len(stated) == 0 {
		return false
	}
	for _, d := range stated[1:] {
		if d != stated[0] {
			r.conflict("the request says it runs in %s and in %s", stated[0], d)
		}
	}
	r.Dir = stated[0]
	return true
}

// statedDir reads what follows "[in ": a directory, "]", then nothing, a
// " (description)", a " [background]" or both. A "]" in the directory or the
// description can make more than one reading fit; a command runs only in a
// directory that exists, so of several readings the one that names an
// existing directory is the one, and none or two that do are ambiguous. The
// directory is made absolute against the session's cwd, as gemini-cli
// resolves dir_path; problem says why there is no one directory.
func statedDir(rest, cwd string) (dir, problem string) {
	var fits []string
	for i := 0; i < len(rest); i++ {
		if rest[i] != ']' || i == 0 {
			continue
		}
		if tail := rest[i+1:]; tail == "" || tail == " [background]" ||
			strings.HasPrefix(tail, " (") && (strings.HasSuffix(tail, ")") || strings.HasSuffix(tail, ") [background]")) {
			d := rest[:i]
			if !filepath.IsAbs(d) {
				d = filepath.Join(cwd, d)
			}
			if !filepath.IsAbs(d) {
				return "", "cannot be made absolute"
			}
			fits = append(fits, filepath.Clean(d))
		}
	}
	switch len(fits) {
	case 0:
		return "", "cannot be told from what follows it"
	case 1:
		return fits[0], ""
	}
	var existing []string
	for _, d := range fits {
		if info, err := os.Stat(d); err == nil && info.IsDir() {
			existing = append(existing, d)
		}
	}
	if len(existing) != 1 {
		return "", "cannot be told from what follows it"
	}
	return existing[0], ""
}
