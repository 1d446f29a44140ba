package notify

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestREADMERecipes runs the exec-channel recipes in contrib/channels, which
// the README points to, through the real exec channel, with stand-ins for
// notify-send, osascript, alerter and curl on PATH that answer as a human
// clicking a button would.
func TestREADMERecipes(t *testing.T) {
	p := Prompt{Version: PromptVersion, ID: "1-1", Agent: "claude-agent-acp", Title: "git push", Kind: "execute",
		Commands: []string{"git push origin main"}, Digest: "d",
		Options: []Option{{ID: "allow", Kind: "allow_once"}, {ID: "always", Kind: "allow_always"}, {ID: "reject", Kind: "reject_once"}}}
	tests := []struct {
		script, tool, fake string
		want               string
	}{
		{"notify-send.sh", "notify-send", `
case "$*" in *--wait*--action=allow_always=*"git push origin main"*) echo allow_always ;; *) echo "unexpected: $*" >&2; exit 3 ;; esac`, "always"},
		{"osascript.sh", "osascript", `
case "$*" in *"claude-agent-acp asks: git push"*) echo "Allow once" ;; *) exit 3 ;; esac`, "allow"},
		{"alerter.sh", "alerter", `echo @CLOSED`, "reject"},
		{"ntfy-curl.sh", "curl", `
state=$(dirname "$0")/published
case "$*" in
*poll=1*) nonce=$(sed -n 's/.*body=allow_once:\([0-9a-f]*\),.*/\1/p' "$state"); echo "reject_once:stale"; echo "allow_once:$nonce" ;;
*) printf '%s\n' "$*" > "$state" ;;
esac`, "allow"},
	}
	for _, tt := range tests {
		t.Run(tt.script, func(t *testing.T) {
			bin := t.TempDir()
			fake := filepath.Join(bin, tt.tool)
			if err := os.WriteFile(fake, []byte("#!/bin/sh\n"+tt.fake+"\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			script, err := filepath.Abs(filepath.Join("..", "contrib", "channels", tt.script))
			if err != nil {
				t.Fatal(err)
			}
			e := &Exec{ChannelName: "recipe", Command: []string{script},
				Env: []string{"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH"), "NTFY_TOPIC=t0p1c", "NTFY_SERVER=http://127.0.0.1:9"}}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			ans, err := e.Ask(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			if ans.OptionID != tt.want {
				t.Fatalf("answered %q, want %q", ans.OptionID, tt.want)
			}
		})
	}
	if !strings.Contains(p.Summary(100), "git push origin main") {
		t.Fatal("summary lost the command")
	}
}
