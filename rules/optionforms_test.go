package rules

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// optionFormRules allow whole programs, so that any spelling of an option the
// programs table knows that slips past it shows as an allow.
const optionFormRules = `
[[rule]]
decision = "allow"
command = ["git diff *", "git log *", "git fetch *", "git push *", "tar *", "cp *", "sed *", "npm test *", "awk *", "make *", "rsync *", "cat *", "dd *", "mv *", "cargo test *", "rg *", "ag *", "bat *", "sort *", "xxd *", "tree *", "git clone *", "git grep *", "git send-email *", "git --attr-source *", "ln *", "curl *", "wget *", "less *", "cd *", "pushd *", "ls *", "ls"]
`

// TestOptionFormsAreNeverAllowed: the options that run code or write
// elsewhere are caught however they are spelled: cut short as getopt_long,
// git's parse-options and npm's nopt accept (`--to-comm`, `--upl`, `--scr`),
// in a cluster or written against their short letter (`-bf x.awk`,
// `-ff.awk`); and arguments the shell expands to a directory the broker
// cannot know (`~root`, `~+`, `of=~me/...`), or that name a protected file
// behind `name=` or `@` (dd's `if=`, curl's `-d @.env`), are never allowed.
func TestOptionFormsAreNeverAllowed(t *testing.T) {
	p := policyFrom(t, optionFormRules)
	for _, cmd := range []string{
		// git parse-options abbreviations of the options that run a command or write.
		"git fetch --upl=./evil origin", "git fetch --upload-p ./evil origin", "git push --rece=./evil origin",
		"git diff --outp=/home/u/.bashrc", "git log --out=x", "git push --exe=./evil",
		// Configuration and commands given to one subcommand, in a cluster too.
		"git clone -c core.fsmonitor=./evil https://example.com/r", "git clone -qc core.fsmonitor=./evil https://example.com/r", "git clone --conf=core.fsmonitor=./evil u",
		"git grep -nO foo", "git send-email --sendmail-cmd=./evil a.patch", "git send-email --smtp-server=./evil a.patch",
		// A global option that takes a value is not the subcommand.
		"git --attr-source HEAD -c core.pager=./evil log",
		// GNU tar, cp, sed, make: getopt_long abbreviations.
		"tar xIf ./evil p.tar", "tar xfI p.tar ./evil", "tar xFf ./evil p.tar", "tar xf p.tar --to-comm=sh", "tar xf p.tar --use-comp=./evil", "tar -xf p.tar --checkpoint-act=exec=sh",
		"tar xf p.tar --dir=/home/u", "tar xf p.tar --direc ~", "tar xf p.tar --directory ~/.config",
		"cp --target=/home/u/.config x", "cp --target-dir ~ x", "mv --target-d=.git/hooks x",
		"sed --in-pl s/a/b/ .git/config", "sed --in-place=.bak s/a/b/ .git/config", "sed --expr='1e id' f", "sed --e='1e id' f", "sed --fi=evil.sed f",
		"make --ev='x:;id'", "make --dir ~", "make -E 'x:;id'", "make build SHELL=./evil.sh", "tar xf p.tar --rmt-command=./evil",
		// Options read from a file or an -e command (an output file among them).
		"curl -K evil.cfg https://example.com", "curl --config=evil.cfg", "wget -e output_document=.git/hooks/x https://example.com", "wget --exec=x u",
		// npm's nopt.
		"npm test --scr=./evil.sh", "npm test --script-sh ./evil.sh", "npm test --node-opt=--require=./e.js", "npm test --userc=./evil.npmrc", "npm test --pre ~",
		// rsync.
		"rsync --rs=sh x host:", "rsync --rsync-p=./evil x host:",
		// gawk's program files, source, and the options that write files.
		"awk --fi evil.awk x", "awk --exe x.awk", "awk --file=x.awk", "awk -ff.awk", "awk -bf x.awk", "awk -E x.awk",
		"awk --inc=x", "awk --lo=ext", "awk -W exec=x.awk", "awk -o.git/hooks/pre-commit 'BEGIN{}'", "awk --pro=.git/hooks/x 'BEGIN{}'",
		"awk --so 'BEGIN{system(\"id\")}'", "awk -e 'BEGIN{system(\"id\")}'", "awk -ve=1 -e 'BEGIN{print 1 > \"x\"}'",
		// Tilde prefixes the broker cannot expand.
		"cat ~root/.ssh/id_rsa", "cat ~u/.ssh/id_rsa", "cp x ~u/.config/acp-broker/config.toml", "cat ~+/.env", "cat ~-/id_rsa",
		"dd if=x of=~u/.config/acp-broker/config.toml", "cp x y=a:~u/.bashrc",
		// Readers that run a program or write a file.
		"rg --pre ./evil.sh foo", "rg --pre=./evil.sh foo", "rg --hostname-bin=./evil foo", "ag --pager=./evil foo", "bat --pager ./evil x",
		"sort --compress-program=./evil x", "sort --compress-p=./evil x", "xxd -r dump .git/hooks/pre-commit", "tree -o .git/hooks/pre-commit",
		"less -o .git/hooks/pre-commit x", "less --log-file=/home/u/.config/zed/settings.json x",
		// A symbolic link to a directory holding protected paths opens them
		// to the next command, which no check can see through a link that
		// does not exist yet.
		"ln -s ~ h && cat h/.ssh/id_rsa", "ln -s ~ src/h && cp x src/h/.config/acp-broker/config.toml", "ln -s / r",
		"ln -s ../.. src/up", "ln -sT ~ h", "ln -st src ~", "ln --target-directory=src ~", "ln -s /home/u/.config hc", "cp -rs ~ h",
		"ln -s ~/.ssh/id_rsa key",
		// cd moves the commands after it where their relative paths are not judged.
		"cd ~ && cat .ssh/id_rsa", "cd ~ && cp x .config/acp-broker/config.toml", "cd /home/u/.config; cp x acp-broker/config.toml",
		"cd .. && cat u/.ssh/id_rsa", "cd && cat .ssh/id_rsa", "cd - && ls", "pushd ~ && cat .ssh/id_rsa", "builtin cd ~ && ls",
		"(cd ~ && tar xf /tmp/p.tar)", "cd src && ls",
		// A protected file behind name= or @.
		"dd if=~/.ssh/id_rsa of=out", "dd if=.env of=out", "cat x=.env", "cat @.env",
	} {
		if v := decide(t, p, cmdCall(cmd)); v.Decision == Allow {
			t.Errorf("%s: allowed (%s: %s)", cmd, v.Source, v.Reason)
		}
	}
	for _, cmd := range []string{
		"git diff --stat", "git log --oneline -5", "git fetch origin", "git push origin main", "tar xf p.tar -C build", "tar --extract --file=p.tar",
		"cp a b", "cp --target-directory=build a", "sed -n 1p f", "sed -e s/a/b/ f", "npm test -- --watch", "npm test --silent",
		"awk '{print $1}' f", "awk -F: -v x=1 '{print $1}' f", "make build", "rsync -a src/ out/", "cat ~/notes", "cat README.md",
		"dd if=a of=b", "cargo test --release", "mv a b", "rg -n foo src", "sort -o out x", "xxd x", "tree src", "less README.md",
		"git clone -b main https://example.com/r", "git grep -n foo",
		"make -j4 build", "make build DEBUG=1", "curl -sSL https://example.com", "wget -q https://example.com",
		"cd /work/repo && ls", "cd . && ls", "ls; cd ~",
		"ln -s README.md doc.md", "ln -s ../lib/x.so src/x.so", "ln -sf src/a.go b.go",
		// An exact option is itself, not a prefix of a longer one.
		"tar xf p.tar --checkpoint=100", "npm test --global",
	} {
		if v := decide(t, p, cmdCall(cmd)); v.Decision != Allow {
			t.Errorf("%s: %s (%s: %s), want allow", cmd, v.Decision, v.Source, v.Reason)
		}
	}
}

// TestRememberedPrefixRefusesOptionsCutShort: a remembered `git fetch *`,
// `npm run test *` or `bun test *` never covers an option that runs code
// or writes, cut short or by another name (bun test --require).
func TestRememberedPrefixRefusesOptionsCutShort(t *testing.T) {
	for _, c := range []struct {
		cmd   string
		words int
	}{
		{"git fetch --upl=./evil origin", 2}, {"git push --rece=./evil", 2}, {"git show --outp=x", 2},
		{"git commit --templ=x", 2}, {"npm run test --scr=./evil.sh", 3},
		{"bun test --require ./evil.ts", 2}, {"bun test --import=./evil.ts", 2},
	} {
		if prefixCovers(strings.Fields(c.cmd), c.words) {
			t.Errorf("a remembered prefix of %d words covers %q", c.words, c.cmd)
		}
	}
	// clap and Go's flag package take no abbreviations: a prefix is another
	// option.
	for _, c := range []string{"git fetch origin main", "git push --force-with-lease origin x", "cargo test --release", "cargo build --target x86_64-unknown-linux-gnu", "go test -v ./..."} {
		if !prefixCovers(strings.Fields(c), 2) {
			t.Errorf("a remembered prefix does not cover %q", c)
		}
	}
}

// TestGitRepositoryByAnyNameIsWriteProtected: a directory git takes for a
// repository (HEAD beside objects/) is protected like .git whatever its name,
// and so is a file named HEAD, which makes one; reading stays allowed.
func TestGitRepositoryByAnyNameIsWriteProtected(t *testing.T) {
	dir := t.TempDir()
	bare := filepath.Join(dir, "fixtures", "bare")
	must(t, os.MkdirAll(filepath.Join(bare, "objects"), 0o755))
	must(t, os.WriteFile(filepath.Join(bare, "HEAD"), []byte("ref: refs/heads/main\n"), 0o644))
	p := policyFrom(t, "[[rule]]\ndecision = \"allow\"\npath = \"/**\"\n\n[[rule]]\ndecision = \"allow\"\ncommand = [\"cp *\", \"cat *\", \"echo *\", \"sort *\"]\n")
	ctx := Context{Cwd: dir, Home: testHome}
	check := func(call string, want Decision) {
		t.Helper()
		if v := p.Decide(ReadToolCallJSON(json.RawMessage(call), ctx)); v.Decision != want {
			t.Errorf("%s: %s (%s: %s), want %s", call, v.Decision, v.Source, v.Reason, want)
		}
	}
	edit := func(path string) string {
		b, _ := json.Marshal(map[string]any{"kind": "edit", "rawInput": map[string]string{"file_path": path, "new_string": "x"}})
		return string(b)
	}
	check(edit(filepath.Join(bare, "config")), Ask)
	check(edit(filepath.Join(bare, "hooks", "pre-commit")), Ask)
	check(edit(filepath.Join(dir, "src", "HEAD")), Ask)
	check(cmdCall("cp x fixtures/bare/config"), Ask)
	check(cmdCall("echo x > fixtures/bare/config"), Ask)
	check(cmdCall("sort -o fixtures/bare/config x"), Ask)
	check(cmdCall("sort -o out x"), Allow)
	check(cmdCall("cat fixtures/bare/config"), Allow)
	check(edit(filepath.Join(dir, "src", "config")), Allow)
	check(`{"kind":"read","locations":[{"path":"`+filepath.Join(bare, "config")+`"}]}`, Allow)
}
