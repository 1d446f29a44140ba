package rules

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

func TestDeriveRemembersNarrowly(t *testing.T) {
	const covers = " (not options that run code or write elsewhere)"
	tests := []struct {
		name, call string
		want       []string // Entry.Matches() of each entry; nil for none
	}{
		{"subcommand prefix", cmdCall("git push origin main"), []string{"command git push *" + covers}},
		{"runner script", cmdCall("npm run test -- --watch"), []string{"command npm run test *" + covers}},
		{"nothing after the subcommand", cmdCall("git status"), []string{"command git status"}},
		{"flag first", cmdCall("ls -la"), []string{"command ls -la"}},
		{"compound: each part", cmdCall("git add . && git commit -m wip"), []string{"command git add *" + covers, "command git commit *" + covers}},
		{"interpreter: exact", cmdCall("python3 manage.py migrate"), []string{"command python3 manage.py migrate"}},
		{"node: exact", cmdCall("node build.js --prod"), []string{"command node build.js --prod"}},
		{"npx: exact", cmdCall("npx prettier --write ."), []string{"command npx prettier --write ."}},
		{"env: exact", cmdCall("env FOO=1 make"), []string{"command env FOO=1 make"}},
		{"bare git", cmdCall("git"), []string{"command git"}},
		{"git with a flag first", cmdCall("git -C /tmp status"), []string{"command git -C /tmp status"}},
		{"program path: exact", cmdCall("./scripts/deploy.sh prod"), []string{"command ./scripts/deploy.sh prod"}},
		{"codex argv unwrapped", `{"kind":"execute","rawInput":{"command":["/bin/bash","-lc","cargo test --release"]}}`, []string{"command cargo test *" + covers}},
		{"go test", cmdCall("go test -run X ./pkg/..."), []string{"command go test *" + covers}},
		// Issue 11 item 3: no prefix for a program without subcommands, a
		// subcommand whose arguments run code or write elsewhere, or a
		// command the user saw with such an option.
		{"cp: exact, not cp README.md *", cmdCall("cp README.md README.bak"), []string{"command cp README.md README.bak"}},
		{"mv: exact", cmdCall("mv a.txt b.txt"), []string{"command mv a.txt b.txt"}},
		{"tar: exact, not tar xf *", cmdCall("tar xf vendor.tar"), []string{"command tar xf vendor.tar"}},
		{"unzip: exact", cmdCall("unzip vendor.zip"), []string{"command unzip vendor.zip"}},
		{"rsync: exact", cmdCall("rsync -a src/ dst/"), []string{"command rsync -a src/ dst/"}},
		{"sed: exact", cmdCall("sed -n 1p README.md"), []string{"command sed -n 1p README.md"}},
		{"find: exact", cmdCall("find . -name x"), []string{"command find . -name x"}},
		{"git config: exact", cmdCall("git config user.email x@y"), []string{"command git config user.email x@y"}},
		{"git alias-like subcommand: exact", cmdCall("git remote add origin https://x/y"), []string{"command git remote add origin https://x/y"}},
		{"git clone: exact", cmdCall("git clone https://x/y"), []string{"command git clone https://x/y"}},
		{"git submodule: exact", cmdCall("git submodule update --init"), []string{"command git submodule update --init"}},
		{"make: exact, targets are code", cmdCall("make deploy prod"), []string{"command make deploy prod"}},
		{"go generate: exact", cmdCall("go generate ./..."), []string{"command go generate ./..."}},
		{"go run: exact", cmdCall("go run main.go"), []string{"command go run main.go"}},
		{"go env: exact", cmdCall("go env GOPATH"), []string{"command go env GOPATH"}},
		{"go test -o seen: exact", cmdCall("go test -c -o t.test ./pkg"), []string{"command go test -c -o t.test ./pkg"}},
		{"go test -coverprofile seen: exact", cmdCall("go test -coverprofile=c.out ./..."), []string{"command go test -coverprofile=c.out ./..."}},
		{"npm install: exact", cmdCall("npm install left-pad"), []string{"command npm install left-pad"}},
		{"npm exec: exact", cmdCall("npm exec foo bar"), []string{"command npm exec foo bar"}},
		{"npm own option seen: exact", cmdCall("npm run test --workspace=a x"), []string{"command npm run test --workspace=a x"}},
		{"yarn script: exact", cmdCall("yarn build --prod"), []string{"command yarn build --prod"}},
		{"cargo run: exact", cmdCall("cargo run --release"), []string{"command cargo run --release"}},
		{"cargo test --manifest-path seen: exact", cmdCall("cargo test --manifest-path ../x/Cargo.toml"), []string{"command cargo test --manifest-path ../x/Cargo.toml"}},
		{"uv run: exact", cmdCall("uv run pytest -x"), []string{"command uv run pytest -x"}},
		{"docker: exact", cmdCall("docker compose up -d"), []string{"command docker compose up -d"}},
		{"pip: exact", cmdCall("pip install requests"), []string{"command pip install requests"}},
		{"git by path: exact", cmdCall("/usr/bin/git push origin main"), []string{"command /usr/bin/git push origin main"}},
		{"go test -exec: nothing (not see-through)", cmdCall("go test -exec ./evil ./..."), nil},
		{"npm --script-shell: nothing (not see-through)", cmdCall("npm run test --script-shell=./evil.sh"), nil},
		{"substitution: nothing", cmdCall("echo $(whoami)"), nil},
		{"eval: nothing", cmdCall("eval ls"), nil},
		{"assignment prefix: nothing", cmdCall("FOO=1 make build"), nil},
		{"redirection: nothing", cmdCall("git log > /tmp/log"), nil},
		{"edit: exact path", `{"kind":"edit","content":[{"type":"diff","path":"/work/repo/src/a.go","newText":"x"}]}`, []string{`path /work/repo/src/a.go (kind "edit" only)`}},
		{"mcp", `{"kind":"other","name":"mcp__github__create_issue"}`, []string{"mcp github/create_issue"}},
		{"fetch: domain", `{"kind":"fetch","rawInput":{"url":"https://docs.rs/serde/latest"}}`, []string{"domain docs.rs"}},
		{"other: tool and title", `{"kind":"other","name":"TodoWrite","title":"Update todos"}`, []string{`tool "TodoWrite" titled "Update todos" (kind "other" only), with no command, path, URL or MCP call`}},
		{"read of a path: nothing", `{"kind":"read","title":"Read file","locations":[{"path":"/work/repo/a"}]}`, nil},
		{"switch_mode: nothing", `{"kind":"switch_mode","title":"Ready to code?"}`, nil},
		{"ambiguous: nothing", `{"kind":"execute","rawInput":{"command":"ls","command":"rm x"}}`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := ReadToolCallJSON(json.RawMessage(tt.call), Context{Cwd: testCwd, Home: testHome})
			entries, why := Derive(req, Allow)
			var got []string
			for _, e := range entries {
				got = append(got, e.Matches())
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Fatalf("got %q (%s), want %q", got, why, tt.want)
			}
			if tt.want == nil && why == "" {
				t.Fatal("remembered nothing without saying why")
			}
		})
	}
}

func TestRememberedAnswersRankBelowWrittenRules(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	project := filepath.Join(dir, "repo")
	must(t, os.MkdirAll(project, 0o755))
	store := StoreIn(state)
	remember := func(call string, d Decision) {
		t.Helper()
		entries, why := Derive(ReadToolCallJSON(json.RawMessage(call), Context{Cwd: project, Home: testHome}), d)
		if len(entries) == 0 {
			t.Fatalf("nothing to remember: %s", why)
		}
		for i := range entries {
			entries[i].Scope, entries[i].Project = "project", project
		}
		if _, err := store.Add(entries...); err != nil {
			t.Fatal(err)
		}
	}
	remember(cmdCall("make deploy prod"), Allow)
	remember(cmdCall("git push origin main"), Allow)
	remember(`{"kind":"edit","rawInput":{"file_path":"`+project+`/.git/config"}}`, Allow)
	remember(cmdCall("curl https://example.com"), Deny)

	user := filepath.Join(dir, "user.toml")
	writeFile(t, user, `
[[rule]]
decision = "ask"
command = "make deploy *"

[[rule]]
decision = "deny"
command = "git push --force *"

[[rule]]
decision = "allow"
command = "curl *"
`, 0o600)
	p, warnings, err := Load(LoadOptions{Locations: Locations{StateDir: state, Home: testHome}, Extra: []string{user}, ProjectDir: project})
	must(t, err)
	if len(warnings) != 0 {
		t.Fatalf("warnings %q", warnings)
	}
	check := func(call string, want Decision, source string) {
		t.Helper()
		v := p.Decide(ReadToolCallJSON(json.RawMessage(call), Context{Cwd: project, Home: testHome}))
		if v.Decision != want || (source != "" && v.Source != source) {
			t.Errorf("%s: %s (%s: %s), want %s (%s)", call, v.Decision, v.Source, v.Reason, want, source)
		}
	}
	check(cmdCall("git push origin feature"), Allow, "remembered")
	check(cmdCall("make deploy prod"), Ask, "rule")              // a written ask stands
	check(cmdCall("git push --force origin main"), Deny, "rule") // a written deny stands
	check(`{"kind":"edit","rawInput":{"file_path":"`+project+`/.git/config"}}`, Ask, "protected")
	check(cmdCall("curl https://example.com"), Deny, "remembered") // a remembered reject is a deny
	// Another project does not see these answers.
	elsewhere := filepath.Join(dir, "other")
	po, _, err := Load(LoadOptions{Locations: Locations{StateDir: state, Home: testHome}, ProjectDir: elsewhere})
	must(t, err)
	other := po.Decide(ReadToolCallJSON(json.RawMessage(cmdCall("git push origin feature")), Context{Cwd: elsewhere, Home: testHome}))
	if other.Decision != Ask {
		t.Errorf("entries of one project applied elsewhere? %s", other.Decision)
	}
}

func TestCorruptStoreIsNeverAllowNorOverwritten(t *testing.T) {
	dir := t.TempDir()
	store := StoreIn(dir)
	garbage := "[[entry]]\ncommand = 'rm -rf *'\ndecision = \"allow\"\nscope = \"user\"\nid = 5\n"
	writeFile(t, store.Path, garbage, 0o600)
	p, warnings, err := Load(LoadOptions{Locations: Locations{StateDir: dir, Home: testHome}})
	must(t, err)
	if len(warnings) != 1 {
		t.Fatalf("warnings = %q", warnings)
	}
	if v := p.Decide(ReadToolCallJSON(json.RawMessage(cmdCall("rm -rf x")), Context{Cwd: testCwd})); v.Decision == Allow {
		t.Fatal("a corrupt store allowed something")
	}
	if _, err := store.Add(Entry{Decision: Allow, Scope: "user", Command: "ls"}); err == nil {
		t.Fatal("wrote over a corrupt store")
	}
	data, _ := os.ReadFile(store.Path)
	if string(data) != garbage {
		t.Fatal("the corrupt store was changed")
	}
}

// TestConcurrentRememberers starts 20 processes that remember 20 different
// answers into one store at the same moment. Every answer must be there
// afterwards, and every process must see all the others'.
func TestConcurrentRememberers(t *testing.T) {
	if os.Getenv("ACP_BROKER_REMEMBERER") != "" {
		return // the child's work is done in TestMain
	}
	exe, err := os.Executable()
	must(t, err)
	dir := t.TempDir()
	start := time.Now().Add(500 * time.Millisecond)
	const n = 20
	cmds := make([]*exec.Cmd, n)
	for i := range n {
		cmd := exec.Command(exe, "-test.run=^$")
		cmd.Env = append(os.Environ(), "ACP_BROKER_REMEMBERER="+strconv.Itoa(i), "ACP_BROKER_STATE="+dir,
			"ACP_BROKER_START="+strconv.FormatInt(start.UnixNano(), 10), "GORACE=atexit_sleep_ms=0")
		out := &lockedBuffer{}
		cmd.Stdout, cmd.Stderr = out, out
		must(t, cmd.Start())
		cmds[i] = cmd
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("rememberer %d: %s", i, out.String())
			}
		})
	}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Errorf("rememberer %d: %v", i, err)
		}
	}
	entries, err := StoreIn(dir).Load()
	must(t, err)
	if len(entries) != n {
		t.Fatalf("%d entries after %d concurrent writers", len(entries), n)
	}
}

func TestDuplicateAnswersMerge(t *testing.T) {
	store := StoreIn(t.TempDir())
	e := Entry{Decision: Allow, Scope: "project", Project: "/work/repo", Command: "git push *"}
	for range 3 {
		if _, err := store.Add(e); err != nil {
			t.Fatal(err)
		}
	}
	other := e
	other.Project = "/work/other"
	if _, err := store.Add(other); err != nil {
		t.Fatal(err)
	}
	entries, err := store.Load()
	if err != nil || len(entries) != 2 {
		t.Fatalf("entries = %+v, %v", entries, err)
	}
}

// TestSameRequest: issue 11 item 20. "Always" is remembered only when the
// tool call answered is the one decided on: a change of what it does, its
// title or its kind is a different request; a change of its status is not.
func TestSameRequest(t *testing.T) {
	read := func(js string) *Request {
		return ReadToolCallJSON(json.RawMessage(js), Context{Cwd: testCwd, Home: testHome})
	}
	base := `{"toolCallId":"t","kind":"execute","title":"git status","status":"pending","rawInput":{"command":"git status"}}`
	same := []string{
		base,
		`{"toolCallId":"t","kind":"execute","title":"git status","status":"in_progress","rawInput":{"command":"git status"}}`,
		`{"toolCallId":"t","kind":"execute","title":"git status","rawInput":{"command":"git status"},"_meta":{"x":1}}`,
	}
	different := []string{
		`{"toolCallId":"t","kind":"execute","title":"git status","rawInput":{"command":"git push --force"}}`,
		`{"toolCallId":"t","kind":"execute","title":"git push","rawInput":{"command":"git status"}}`,
		`{"toolCallId":"t","kind":"other","title":"git status","rawInput":{"command":"git status"}}`,
		`{"toolCallId":"t","kind":"execute","title":"git status","rawInput":{"command":"git status"},"locations":[{"path":"/work/repo/x"}]}`,
		`{"toolCallId":"t","kind":"execute","title":"git status","rawInput":{"command":"git status","url":"https://x.example/"}}`,
	}
	for _, js := range same {
		if !SameRequest(read(base), read(js)) {
			t.Errorf("not the same: %s", js)
		}
	}
	for _, js := range different {
		if SameRequest(read(base), read(js)) {
			t.Errorf("the same: %s", js)
		}
	}
}
