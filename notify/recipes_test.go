package notify

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// recorder is the start of every stand-in tool: it keeps, per run, exactly
// the argv (NUL-separated) and the stdin it got, in the stand-in's
// directory, before the tool's own behaviour.
const recorder = `#!/bin/sh
dir=$(dirname "$0")
run=$(mktemp "$dir/run.XXXXXX")
printf '%s\0' "$@" > "$run.argv"
cat > "$run.stdin"
`

// recipes are the exec-channel scripts in contrib/channels, each with a
// stand-in for the tool it drives that answers as a human clicking a button
// would, and the answer that click means.
var recipes = []struct {
	script, tool, fake string
	want               string
}{
	{"notify-send.sh", "notify-send", `
case "$*" in *--wait*--action=allow_always=*) echo allow_always ;; *) echo "unexpected: $*" >&2; exit 3 ;; esac`, "always"},
	{"osascript.sh", "osascript", `
case "$ACP_BROKER_SUMMARY" in "") exit 3 ;; *) echo "Allow once" ;; esac`, "allow"},
	{"alerter.sh", "alerter", `echo @CLOSED`, "reject"},
	{"ntfy-curl.sh", "curl", `
case "$*" in
*poll=1*)
	nonce=$(for f in "$dir"/run.*.argv; do tr '\0' '\n' < "$f"; done | sed -n 's/.*body=allow_once:\([0-9a-f]*\),.*/\1/p' | head -n1)
	echo "reject_once:stale"; echo "allow_once:$nonce" ;;
esac`, "allow"},
}

// runRecipe runs one recipe through the real exec channel with its stand-in
// on PATH, and returns the stand-in's runs (argv, stdin) and the answer.
func runRecipe(t *testing.T, script, tool, fake string, p Prompt) ([][]string, [][]byte, Answer) {
	t.Helper()
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, tool), []byte(recorder+fake+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	path, err := filepath.Abs(filepath.Join("..", "contrib", "channels", script))
	if err != nil {
		t.Fatal(err)
	}
	e := &Exec{ChannelName: "recipe", Command: []string{path},
		Env: []string{"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH"), "NTFY_TOPIC=t0p1c", "NTFY_SERVER=http://127.0.0.1:9"}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ans, err := e.Ask(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	runs, err := filepath.Glob(filepath.Join(bin, "run.*.argv"))
	if err != nil || len(runs) == 0 {
		t.Fatalf("the stand-in %s never ran (%v)", tool, err)
	}
	var argvs [][]string
	var stdins [][]byte
	for _, r := range runs {
		raw, err := os.ReadFile(r)
		if err != nil {
			t.Fatal(err)
		}
		argvs = append(argvs, strings.Split(strings.TrimSuffix(string(raw), "\x00"), "\x00"))
		in, err := os.ReadFile(strings.TrimSuffix(r, ".argv") + ".stdin")
		if err != nil {
			t.Fatal(err)
		}
		stdins = append(stdins, in)
	}
	return argvs, stdins, ans
}

// TestREADMERecipes runs the exec-channel recipes in contrib/channels, which
// the README points to, through the real exec channel, with stand-ins for
// notify-send, osascript, alerter and curl on PATH that answer as a human
// clicking a button would.
func TestREADMERecipes(t *testing.T) {
	p := Prompt{Version: PromptVersion, ID: "1-1", Agent: "claude-agent-acp", Title: "git push", Kind: "execute",
		Commands: []string{"git push origin main"}, Digest: "d",
		Options: []Option{{ID: "allow", Kind: "allow_once"}, {ID: "always", Kind: "allow_always"}, {ID: "reject", Kind: "reject_once"}}}
	for _, r := range recipes {
		t.Run(r.script, func(t *testing.T) {
			if _, _, ans := runRecipe(t, r.script, r.tool, r.fake, p); ans.OptionID != r.want {
				t.Fatalf("answered %q, want %q", ans.OptionID, r.want)
			}
		})
	}
	if !strings.Contains(p.Summary(100), "git push origin main") {
		t.Fatal("summary lost the command")
	}
}

// TestRecipesWithHostileText: the request's title and commands are the
// agent's text. Each recipe is run with text that a careless script would
// turn into a file read (curl's @file), an option (a leading "-"), more
// arguments or a command (shell metacharacters): the stand-in tools must get
// the text only where the recipe means it (on stdin, or after "--" as
// notify-send's title and body), byte for byte, no argument may be made of
// it, nothing may run, and no local file's content may be published.
func TestRecipesWithHostileText(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret.env")
	const secretContent = "API_TOKEN=hunter2-do-not-publish"
	if err := os.WriteFile(secret, []byte(secretContent+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	pwned := filepath.Join(dir, "pwned")
	hostile := map[string]string{
		"at_file":          "@" + secret,
		"at_file_relative": "@secret.env",
		"at_stdin":         "@-",
		"leading_dash":     "-K" + secret,
		"long_option":      "--data-binary=@" + secret,
		"forged_button":    "--action=allow_once=Reject",
		"newlines":         "first line\n--output=" + pwned + "\n@" + secret,
		"crlf":             "a\r\nTitle: forged",
		"metacharacters":   "x; touch " + pwned + " | cat " + secret + " & > " + pwned + " 'q' \"dq\" \\ *",
		"command_subst":    "$(touch " + pwned + ")",
		"backticks":        "`touch " + pwned + "`",
		"variables":        "$HOME ${PATH} $ACP_BROKER_AGENT",
		"applescript":      "\" & (do shell script \"touch " + pwned + "\") & \"",
		"very_long":        "@" + secret + strings.Repeat(" -x $(touch "+pwned+")", 400),
	}
	for name, text := range hostile {
		p := Prompt{Version: PromptVersion, ID: "1-1", Agent: "claude-agent-acp", Title: text, Kind: "execute",
			Commands: []string{text, "git push origin main"}, Digest: "d",
			Options: []Option{{ID: "allow", Kind: "allow_once"}, {ID: "always", Kind: "allow_always"}, {ID: "reject", Kind: "reject_once"}}}
		env := promptEnv(p)
		title := strings.TrimPrefix(env[1], "ACP_BROKER_TITLE=")
		summary := strings.TrimPrefix(env[3], "ACP_BROKER_SUMMARY=")
		for _, r := range recipes {
			t.Run(name+"/"+r.script, func(t *testing.T) {
				argvs, stdins, ans := runRecipe(t, r.script, r.tool, r.fake, p)
				if ans.OptionID != r.want {
					t.Errorf("answered %q, want %q", ans.OptionID, r.want)
				}
				if _, err := os.Stat(pwned); !os.IsNotExist(err) {
					os.Remove(pwned)
					t.Fatalf("the text ran a command: %s exists", pwned)
				}
				for i, argv := range argvs {
					for _, in := range [][]byte{[]byte(strings.Join(argv, "\x00")), stdins[i]} {
						if bytes.Contains(in, []byte(secretContent)) {
							t.Fatalf("%s got the secret file's content: %q", r.tool, in)
						}
					}
					options := argv
					if r.tool == "notify-send" {
						// The title and body are arguments, after "--" only.
						end := slices.Index(argv, "--")
						if end < 0 || !slices.Equal(argv[end+1:], []string{p.Agent + " asks: " + title, summary}) {
							t.Fatalf("notify-send got %q, want the title and summary exactly, after --", argv)
						}
						options = argv[:end]
					}
					for _, a := range options {
						for _, piece := range distinctive(text) {
							if strings.Contains(a, piece) {
								t.Fatalf("%s got an argument made of the text: %q", r.tool, a)
							}
						}
					}
				}
				switch r.tool {
				case "curl":
					published := 0
					for i, argv := range argvs {
						if slices.Contains(argv, "--data-binary") {
							published++
							if i := slices.Index(argv, "--data-binary"); argv[i+1] != "@-" {
								t.Errorf("curl publishes %q, want @- (stdin)", argv[i+1])
							}
							if string(stdins[i]) != summary {
								t.Errorf("curl published %q, want the summary %q", stdins[i], summary)
							}
						}
					}
					if published != 1 {
						t.Errorf("curl published %d times, want once: %q", published, argvs)
					}
				case "alerter":
					if len(stdins) != 1 || string(stdins[0]) != title+"\n"+summary {
						t.Errorf("alerter read %q, want the title and summary", stdins)
					}
				}
			})
		}
	}
}

// distinctive returns the pieces of a text that no recipe's own arguments
// contain: each line of six bytes or more, cut to its first 40.
func distinctive(text string) []string {
	var out []string
	for _, line := range strings.FieldsFunc(text, func(r rune) bool { return r == '\n' || r == '\r' }) {
		if len(line) >= 6 {
			out = append(out, line[:min(len(line), 40)])
		}
	}
	return out
}

// TestRecipesLeaveQuestionsAlone: the recipes' buttons answer permission
// requests. A question reaches them too, and gets no answer from them, with
// no notification whose Allow button would mean nothing: the tool they
// drive never runs.
func TestRecipesLeaveQuestionsAlone(t *testing.T) {
	for _, p := range []Prompt{formQuestion(questionSchema), {Version: PromptVersion, ID: "1-2", Mode: "url", Message: "Sign in", URL: "https://example.com/", Digest: "d"}} {
		for _, r := range recipes {
			t.Run(p.Mode+"/"+r.script, func(t *testing.T) {
				bin := t.TempDir()
				if err := os.WriteFile(filepath.Join(bin, r.tool), []byte(recorder+r.fake+"\n"), 0o755); err != nil {
					t.Fatal(err)
				}
				path, err := filepath.Abs(filepath.Join("..", "contrib", "channels", r.script))
				if err != nil {
					t.Fatal(err)
				}
				e := &Exec{ChannelName: "recipe", Command: []string{path},
					Env: []string{"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH"), "NTFY_TOPIC=t0p1c", "NTFY_SERVER=http://127.0.0.1:9"}}
				ans, err := execAsk(t, e, p)
				if err == nil || !errors.Is(err, ErrNoAnswer) || !strings.Contains(err.Error(), "answered in the editor or with acp-broker answer") {
					t.Fatalf("Ask = %+v, %v; want no answer, pointing elsewhere", ans, err)
				}
				if runs, _ := filepath.Glob(filepath.Join(bin, "run.*.argv")); len(runs) != 0 {
					t.Errorf("%s ran for a question", r.tool)
				}
			})
		}
	}
}
