package rules

import (
	"path/filepath"
	"slices"
	"strings"
)

// What the broker knows of programs, in one place for the shell analysis
// (which reads through wrappers, shells and interpreters, and marks options
// that run a command of their choosing) and for what "always" remembers
// (which programs have subcommands a prefix may stand for, which options a
// remembered prefix must never cover) and for protected arguments (which
// arguments name what a program writes).

// shells are the shells whose -c script the shell analysis reads (readable),
// in its dialect; the others are opaque.
var shells = map[string]shellKind{
	"bash": {true, "bash"}, "rbash": {true, "bash"},
	"sh": {true, "sh"}, "dash": {true, "sh"}, "ash": {true, "sh"},
	"zsh": {true, "zsh"},
	"ksh": {true, "mksh"}, "mksh": {true, "mksh"}, "pdksh": {true, "mksh"}, "oksh": {true, "mksh"}, "ksh93": {true, "mksh"},
	"fish": {}, "csh": {}, "tcsh": {}, "yash": {}, "posh": {}, "pwsh": {}, "powershell": {},
	"nu": {}, "xonsh": {}, "elvish": {}, "rc": {}, "es": {}, "osh": {}, "ysh": {},
}

// wrappers are programs that run their arguments as a command; each reads
// its own options (shell.go).
var wrappers map[string]func(args []string) wrapperOptions

func init() {
	wrappers = map[string]func([]string) wrapperOptions{
		"env":       readEnvOptions,
		"command":   readCommandOptions,
		"builtin":   func(args []string) wrapperOptions { return readPlainOptions("builtin", args, "", "") },
		"nohup":     func(args []string) wrapperOptions { return readPlainOptions("nohup", args, "", "") },
		"setsid":    func(args []string) wrapperOptions { return readPlainOptions("setsid", args, "cfw", "") },
		"unbuffer":  func(args []string) wrapperOptions { return readPlainOptions("unbuffer", args, "p", "") },
		"stdbuf":    func(args []string) wrapperOptions { return readPlainOptions("stdbuf", args, "", "ioe") },
		"ionice":    func(args []string) wrapperOptions { return readPlainOptions("ionice", args, "t", "cn") },
		"nice":      readNiceOptions,
		"timeout":   readTimeoutOptions,
		"time":      readTimeOptions,
		"chrt":      readChrtOptions,
		"busybox":   readBusyboxOptions,
		"noglob":    func(args []string) wrapperOptions { return readPlainOptions("noglob", args, "", "") },
		"nocorrect": func(args []string) wrapperOptions { return readPlainOptions("nocorrect", args, "", "") },
	}
}

// interpreters run code given on their command line or on stdin.
var interpreters = map[string]interpreter{
	"python":    {shortFlags: "ci", valued: []string{"-W", "-X", "-m"}, info: []string{"-V", "-h"}},
	"node":      {shortFlags: "epi", longFlags: []string{"--eval", "--print", "--interactive"}, valued: []string{"-r", "--require", "--import", "--loader", "-C", "--conditions"}, info: []string{"-v", "-h"}},
	"bun":       {shortFlags: "ep", longFlags: []string{"--eval", "--print"}, valued: []string{"-r", "--preload"}},
	"deno":      {shortFlags: "", longFlags: []string{"--eval", "eval", "repl"}},
	"perl":      {shortFlags: "eEd", info: []string{"-v", "-V"}},
	"ruby":      {shortFlags: "e", valued: []string{"-r", "-I", "-C"}},
	"php":       {shortFlags: "rBREaF", longFlags: []string{"--run"}, valued: []string{"-c", "-d", "-z"}, info: []string{"-v", "-h", "-m", "-i"}},
	"lua":       {shortFlags: "ei", valued: []string{"-l"}, info: []string{"-v"}},
	"luajit":    {shortFlags: "eij", valued: []string{"-l"}},
	"rscript":   {shortFlags: "e", longFlags: []string{"--expr"}},
	"r":         {shortFlags: "e", longFlags: []string{"--expr"}},
	"osascript": {shortFlags: "ei", valued: []string{"-l", "-s"}},
	"expect":    {shortFlags: "ci"},
	"tclsh":     {},
	"wish":      {},
	"groovy":    {shortFlags: "e"},
	"ts-node":   {shortFlags: "ep", longFlags: []string{"--eval", "--print"}},
	"tsx":       {shortFlags: "ep", longFlags: []string{"--eval", "--print"}},
}

// optionSet names options: long ones match as prefixes (`--to-command`
// matches `--to-command=x`), short letters anywhere in a cluster of
// single-letter options (`-xzI`).
type optionSet struct {
	long  []string
	short string
	// whole: the program takes long options only whole (Go's flag
	// package, cargo's clap), so a prefix is another option (`cargo build
	// --target x` is not --target-dir).
	whole bool
}

// has reports whether one argument is an option of the set, or a long one
// of the set cut short (abbreviates).
func (s optionSet) has(arg string) bool {
	for _, long := range s.long {
		if strings.HasPrefix(arg, long) || (!s.whole && abbreviates(arg, long)) {
			return true
		}
	}
	return s.short != "" && len(arg) > 1 && arg[0] == '-' && arg[1] != '-' && strings.ContainsAny(arg[1:], s.short)
}

// abbreviates reports whether arg (up to an `=`) is the long option o cut
// short: getopt_long (GNU tar, cp, sed, make, gawk, wget), git's
// parse-options and npm's nopt take any unambiguous prefix of a long option
// for it, so `tar --to-comm=sh` is `--to-command=sh` and `git fetch
// --upl=./evil` is `--upload-pack=./evil`. Which prefixes are unambiguous
// depends on the program and its version: every prefix counts.
func abbreviates(arg, o string) bool {
	name, _, _ := strings.Cut(arg, "=")
	if name != o && slices.Contains(wholeOptions, name) {
		return false
	}
	return len(name) > 2 && strings.HasPrefix(name, "--") && strings.HasPrefix(o, "--") && strings.HasPrefix(o, name)
}

// wholeOptions are options of their own that a longer option of the tables
// starts with; a parser takes an exact name for itself, not as a prefix
// (`npm install --global` is not --globalconfig, `tar --checkpoint=10` is
// not --checkpoint-action).
var wholeOptions = []string{"--global", "--checkpoint"}

// commandOptions are options that make a commonly allowed program run a
// command line of their choosing, or write a file no redirection shows: an
// allow rule for `tar *` must not allow `tar --to-command='rm x'`. The shell
// analysis makes a command using one not see-through.
var commandOptions = map[string]optionSet{
	"tar":   {long: []string{"--to-command", "--use-compress-program", "--checkpoint-action", "--rsh-command", "--rmt-command", "--info-script", "--new-volume-script"}, short: "IF"},
	"rsync": {long: []string{"--rsh", "--rsync-path"}, short: "e"},
	"scp":   {short: "SF"},
	"sftp":  {short: "SF"},
	"ssh":   {short: "F"},
	"zip":   {long: []string{"--unzip-command", "-TT"}},
	// go runs the test binary, the toolchain or the vet tool through them.
	"go": {long: []string{"-exec", "--exec", "-toolexec", "--toolexec", "-vettool", "--vettool"}, whole: true},
	// npm-like tools run scripts through --script-shell and load config
	// (which can set it) from --userconfig.
	"npm":   {long: []string{"--script-shell", "--node-options", "--userconfig", "--globalconfig", "--call", "--shell"}},
	"pnpm":  {long: []string{"--script-shell", "--node-options", "--userconfig", "--globalconfig", "--shell-emulator"}},
	"yarn":  {long: []string{"--script-shell", "--node-options", "--userconfig", "--globalconfig"}},
	"cargo": {long: []string{"--config"}, whole: true},
	// make -E is --eval; SHELL= on the command line runs every recipe
	// through a program of the agent's choosing.
	"make": {long: []string{"--eval", "SHELL=", ".SHELLFLAGS="}, short: "E"},
	// curl and wget read more options, an output file among them, from a
	// config file or an -e command.
	"curl": {long: []string{"--config"}, short: "K"},
	"wget": {long: []string{"--execute", "--config"}, short: "e"},
	// Readers that run a program of their choosing on what they read or
	// show: ripgrep's preprocessor, pagers, sort's compressor.
	"rg":   {long: []string{"--pre", "--hostname-bin"}},
	"ag":   {long: []string{"--pager"}},
	"bat":  {long: []string{"--pager"}},
	"sort": {long: []string{"--compress-program"}},
}

// gitRunningOptions are options of git subcommands that run a command of
// their choosing or write a file elsewhere; gitSubcommandRunners are
// short options of one subcommand that run a command.
var (
	gitRunningOptions = []string{"--upload-pack", "--receive-pack", "--exec", "--extcmd", "--open-files-in-pager", "--output", "--template", "--config",
		"--sendmail-cmd", "--smtp-server", "--to-cmd", "--cc-cmd", "--header-cmd"}
	// Letters, also inside a cluster (`git clone -qc core.fsmonitor=x`).
	gitSubcommandRunners = map[string]string{"grep": "O", "clone": "uc", "rebase": "x", "difftool": "x", "submodule": "c"}
)

// findWriters are find actions that write or delete files: find's starting
// points are then what it changes.
var findWriters = []string{"-delete", "-fprint", "-fprint0", "-fprintf", "-fls"}

// subcommand is one subcommand "always" may remember as a prefix: its
// further arguments do not choose what code runs or which files outside
// the project are written, except through the options listed.
type subcommand struct {
	// runner: the next word names what runs (`npm run test`) and is part of
	// the prefix.
	runner bool
	// unsafe are options that run code or write files elsewhere; a
	// remembered prefix never covers a command using one.
	unsafe optionSet
	// ownOptions: every option of the program itself (before `--`) sets
	// configuration that may run code, so a remembered prefix covers only
	// those in safe; what follows `--` goes to the script.
	ownOptions bool
}

// Options of npm-like tools a remembered `npm run test *` may still cover.
var npmSafeOptions = []string{"--silent", "-s", "--quiet", "-q", "--if-present", "--color", "--no-color", "--loglevel", "--no-progress"}

// goUnsafe are go's build and test flags that run a program of their
// choosing, replace source files, or write files where they say.
var goUnsafe = optionSet{long: []string{"-exec", "-toolexec", "-vettool", "-overlay", "-o", "-C", "-ldflags", "-gcflags", "-asmflags", "-gccgoflags", "-compiler", "-modfile", "-pkgdir", "-coverprofile", "-cpuprofile", "-memprofile", "-blockprofile", "-mutexprofile", "-trace", "-outputdir", "-test.coverprofile", "-test.cpuprofile", "-test.memprofile", "-test.blockprofile", "-test.mutexprofile", "-test.trace", "-test.outputdir", "-test.testlogfile", "-test.gocoverdir", "-fuzzcachedir", "-test.fuzzcachedir"}, whole: true}

// cargoUnsafe are cargo's options that load configuration (which can name
// runners and linkers), build another package, or write elsewhere; and the
// test harness's --logfile.
var cargoUnsafe = optionSet{long: []string{"--config", "-Z", "--manifest-path", "--target-dir", "--artifact-dir", "--out-dir", "-C", "--lockfile-path", "--logfile", "--path", "--root"}, whole: true}

var gitUnsafe = optionSet{long: gitRunningOptions}

func npmLike(runner string) map[string]subcommand {
	subs := map[string]subcommand{
		"run":  {runner: true, ownOptions: true},
		"test": {ownOptions: true},
	}
	if runner == "npm" {
		subs["run-script"] = subs["run"]
		subs["t"] = subs["test"]
	}
	return subs
}

// subcommandPrograms are the programs whose first argument is a subcommand
// "always" may remember as a prefix (`git push origin main` → `git push *`),
// with those subcommands. Any other program, or another subcommand, is
// remembered as the exact command: `cp README.md *` would also copy over
// .git/hooks, `git config *` would set core.fsmonitor, `go generate *` and
// `go run *` run what they are given.
var subcommandPrograms = map[string]map[string]subcommand{
	"git": {
		"status": {unsafe: gitUnsafe}, "log": {unsafe: gitUnsafe}, "diff": {unsafe: gitUnsafe}, "show": {unsafe: gitUnsafe},
		"blame": {unsafe: gitUnsafe}, "add": {unsafe: gitUnsafe}, "commit": {unsafe: gitUnsafe},
		// Not pull: `git pull URL` merges anyone's files into the project.
		"push": {unsafe: gitUnsafe}, "fetch": {unsafe: gitUnsafe},
		"switch": {unsafe: gitUnsafe}, "ls-files": {unsafe: gitUnsafe}, "shortlog": {unsafe: gitUnsafe},
	},
	"npm":  npmLike("npm"),
	"pnpm": npmLike("pnpm"),
	"yarn": npmLike("yarn"),
	"bun":  {"run": {runner: true, ownOptions: true}, "test": {unsafe: optionSet{long: []string{"--preload", "-r", "--require", "--import", "--config", "-c", "--coverage-dir"}}}},
	"go": {
		"test": {unsafe: goUnsafe}, "build": {unsafe: goUnsafe}, "vet": {unsafe: goUnsafe},
		"list": {unsafe: goUnsafe}, "doc": {unsafe: goUnsafe}, "version": {unsafe: goUnsafe},
	},
	"cargo": {
		"test": {unsafe: cargoUnsafe}, "build": {unsafe: cargoUnsafe}, "check": {unsafe: cargoUnsafe},
		"clippy": {unsafe: cargoUnsafe}, "doc": {unsafe: cargoUnsafe}, "bench": {unsafe: cargoUnsafe},
		"fmt": {unsafe: cargoUnsafe}, "tree": {unsafe: cargoUnsafe}, "metadata": {unsafe: cargoUnsafe},
	},
}

// prefixCovers reports whether a command a remembered prefix of prefixWords
// words matches stays within what the prefix stands for: none of the
// arguments after the prefix is an option of that program that runs code
// or writes elsewhere. A command whose program and subcommand are not in
// subcommandPrograms is not covered by a prefix at all.
func prefixCovers(argv []string, prefixWords int) bool {
	if len(argv) < prefixWords || prefixWords < 2 {
		return false
	}
	subs, ok := subcommandPrograms[argv[0]]
	if !ok {
		return false
	}
	sub, ok := subs[argv[1]]
	if !ok {
		return false
	}
	if prefixWords != 2+boolInt(sub.runner) {
		return false
	}
	global := commandOptions[argv[0]]
	ownOptions := sub.ownOptions
	for _, arg := range argv[prefixWords:] {
		if arg == "--" && ownOptions {
			// What follows goes to the project's own script.
			return true
		}
		name, _, _ := strings.Cut(arg, "=")
		if ownOptions && strings.HasPrefix(arg, "-") && !slices.Contains(npmSafeOptions, name) {
			return false
		}
		if global.has(arg) || sub.unsafe.has(arg) || sub.unsafe.has(strings.Replace(arg, "--", "-", 1)) {
			return false
		}
	}
	return true
}

// prefixKnown reports whether a remembered prefix is a program and
// subcommand (and runner name) of subcommandPrograms, which prefixCovers can
// ever accept.
func prefixKnown(prefix []SimpleCommand) bool {
	if len(prefix) != 1 {
		return false
	}
	argv := prefix[0].Argv
	return len(argv) >= 2 && prefixCovers(argv, len(argv))
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// writer says which arguments of a program name what it changes.
type writer struct {
	// operands: "all" (rm x y), "last" (cp x y), or "" (only options).
	operands string
	// options take a value naming a destination (`-t DIR`, `-C DIR`).
	options []string
	// when, if set, is an option without which the program writes nothing
	// (sed -i).
	when []string
}

// writers are programs that write or remove the files their arguments name.
// A destination that is a protected path, a write-protected one, or the
// directory above one (~, the project, a directory holding .git) is a
// protected argument: `cp x .` and `tar xf p.tar -C ~` can replace
// .git/hooks or the broker's config.
var writers = map[string]writer{
	"cp": {operands: "last", options: []string{"-t", "--target-directory"}}, "install": {operands: "last", options: []string{"-t", "--target-directory"}},
	"ln": {operands: "last", options: []string{"-t", "--target-directory"}}, "rsync": {operands: "last"}, "scp": {operands: "last"},
	"mv": {operands: "all", options: []string{"-t", "--target-directory"}},
	"rm": {operands: "all"}, "rmdir": {operands: "all"}, "unlink": {operands: "all"}, "shred": {operands: "all"},
	"truncate": {operands: "all"}, "touch": {operands: "all"}, "mkdir": {operands: "all"}, "tee": {operands: "all"},
	"chmod": {operands: "all"}, "chown": {operands: "all"}, "chgrp": {operands: "all"}, "chattr": {operands: "all"}, "setfacl": {operands: "all"},
	"tar":   {options: []string{"-C", "--directory"}},
	"unzip": {options: []string{"-d"}},
	"patch": {options: []string{"-d", "--directory", "-o", "--output"}},
	"sed":   {operands: "all", when: []string{"-i", "--in-place"}}, "gsed": {operands: "all", when: []string{"-i", "--in-place"}},
	"git":   {options: []string{"-C", "--git-dir", "--work-tree"}},
	"make":  {options: []string{"-C", "--directory"}},
	"npm":   {options: []string{"--prefix", "-C"}},
	"cargo": {options: []string{"-C", "--target-dir", "--artifact-dir", "--out-dir", "--root"}},
	"go":    {options: []string{"-C", "-o"}},
	"dd":    {options: []string{"of"}},
	"less":  {options: []string{"-o", "-O", "--log-file", "--LOG-FILE"}},
	"xxd":   {operands: "last"}, "tree": {options: []string{"-o"}}, "sort": {options: []string{"-o", "--output"}},
	"curl": {options: []string{"-o", "--output", "--output-dir"}},
	"wget": {options: []string{"-O", "--output-document", "-P", "--directory-prefix"}},
}

// dirOptions make any program act in another directory; their value is a
// destination whatever the program.
var dirOptions = []string{"-C", "--directory", "--chdir", "--cwd"}

// readers are programs that only read the files their arguments name: an
// argument naming a write-protected path (.git/config) is fine for them.
var readers = []string{
	"cat", "more", "head", "tail", "grep", "egrep", "fgrep", "rg", "ag", "ls", "wc", "diff", "cmp",
	"file", "stat", "du", "bat", "md5sum", "sha1sum", "sha256sum", "sha512sum", "shasum", "readlink",
	"realpath", "basename", "dirname", "od", "hexdump", "strings", "nl",
	"echo", "printf", "which", "type", "test", "[", "pwd", "jq",
}

// gitReaders are git subcommands that only read.
var gitReaders = []string{"status", "log", "diff", "show", "blame", "ls-files", "shortlog", "grep", "rev-parse", "cat-file", "ls-tree", "describe"}

// readsOnly reports whether a command only reads what its arguments name.
func readsOnly(argv []string) bool {
	prog := programKey(argv[0])
	if prog == "git" {
		return len(argv) > 1 && slices.Contains(gitReaders, argv[1])
	}
	if prog == "find" {
		return !slices.ContainsFunc(argv[1:], func(a string) bool { return slices.Contains(findWriters, a) })
	}
	if w, ok := writers[prog]; ok && len(w.when) > 0 {
		// sed without -i prints.
		return !slices.ContainsFunc(argv[1:], func(a string) bool {
			return slices.ContainsFunc(w.when, func(o string) bool { return hasOption(a, o) })
		})
	}
	return slices.Contains(readers, prog)
}

// destinations lists the arguments of a command that name what it writes:
// per the writers table, the value of a directory option (-C, --directory)
// of any program, and the starting points of a find that deletes or writes.
func destinations(argv []string) []string {
	prog := programKey(argv[0])
	args := argv[1:]
	w, known := writers[prog]
	options := append(slices.Clone(dirOptions), w.options...)
	var out, operands []string
	active := len(w.when) == 0
	endOfOptions := false
	clustered := false // a writer's short option inside a cluster (`tar -xvC DIR`)
	for i := 0; i < len(args); i++ {
		arg := args[i]
		if !endOfOptions && slices.ContainsFunc(w.options, func(o string) bool { return inCluster(arg, o, prog == "tar" && i == 0) }) {
			// Which following word is its value depends on the cluster's
			// order: every word after it counts.
			clustered = true
		}
		if endOfOptions || !strings.HasPrefix(arg, "-") || arg == "-" {
			if clustered {
				out = append(out, arg)
			}
			if value, ok := strings.CutPrefix(arg, "of="); ok && prog == "dd" {
				out = append(out, value)
				continue
			}
			operands = append(operands, arg)
			continue
		}
		if arg == "--" {
			endOfOptions = true
			continue
		}
		name, value, hasValue := strings.Cut(arg, "=")
		if slices.ContainsFunc(w.when, func(o string) bool { return hasOption(arg, o) }) {
			active = true
		}
		for _, o := range options {
			switch {
			case (name == o || abbreviates(arg, o)) && hasValue:
				out = append(out, value)
			case (arg == o || abbreviates(arg, o)) && i+1 < len(args):
				out = append(out, args[i+1])
			case len(o) == 2 && o[1] != '-' && strings.HasPrefix(arg, o) && len(arg) > 2 && !strings.HasPrefix(arg, "--"):
				out = append(out, arg[2:]) // -C/dir
			}
		}
	}
	if prog == "find" && slices.ContainsFunc(args, func(a string) bool { return slices.Contains(findWriters, a) }) {
		for _, a := range args {
			if strings.HasPrefix(a, "-") || a == "(" || a == "!" {
				break
			}
			out = append(out, a)
		}
	}
	if !known || !active {
		return out
	}
	switch w.operands {
	case "all":
		out = append(out, operands...)
	case "last":
		if len(operands) > 1 {
			out = append(out, operands[len(operands)-1])
		}
	}
	return out
}

// linkTargets lists what the symbolic links a command makes point at, and
// the directories the links are made in: ln's operands but the last (all
// of them with -t), and cp -s's sources. A relative target is relative to
// the link's directory.
func linkTargets(argv []string) (targets, linkDirs []string) {
	prog := programKey(argv[0])
	args := argv[1:]
	if prog != "ln" && !(prog == "cp" && slices.ContainsFunc(args, func(a string) bool {
		return a == "--symbolic-link" || (len(a) > 1 && a[0] == '-' && a[1] != '-' && strings.IndexByte(a, 's') > 0)
	})) {
		return nil, nil
	}
	var operands []string
	targetDir := ""
	for i := 0; i < len(args); i++ {
		arg := args[i]
		name, value, hasValue := strings.Cut(arg, "=")
		switch {
		case arg == "--":
			operands = append(operands, args[i+1:]...)
			i = len(args)
		case arg == "-t" || arg == "-S" || arg == "--suffix" || (abbreviates(arg, "--target-directory") && !hasValue):
			if i+1 < len(args) {
				if arg != "-S" && arg != "--suffix" {
					targetDir = args[i+1]
				}
				i++
			}
		case abbreviates(name, "--target-directory") && hasValue:
			targetDir = value
		case strings.HasPrefix(arg, "-t") && !strings.HasPrefix(arg, "--"):
			targetDir = arg[2:]
		case strings.HasPrefix(arg, "-") && arg != "-":
		default:
			operands = append(operands, arg)
		}
	}
	switch {
	case targetDir != "":
		return operands, []string{targetDir}
	case len(operands) > 1:
		last := operands[len(operands)-1]
		return operands[:len(operands)-1], []string{last, filepath.Dir(last)}
	}
	return operands, []string{"."}
}

// inCluster reports whether arg is a cluster of short options that holds
// the short option o other than at its start (`-xvC`); bare is tar's old
// style, a first argument without the dash (`xvCf`).
func inCluster(arg, o string, bare bool) bool {
	if len(o) != 2 || o[1] == '-' {
		return false
	}
	if bare && !strings.HasPrefix(arg, "-") {
		return strings.IndexByte(arg, o[1]) >= 0
	}
	return len(arg) > 2 && arg[0] == '-' && arg[1] != '-' && strings.IndexByte(arg[2:], o[1]) >= 0
}

// hasOption reports whether arg is option o, with a value, cut short
// (`--in-pl`) or, for a short option, in a cluster (`-ni` has -i).
func hasOption(arg, o string) bool {
	if strings.HasPrefix(arg, o) || abbreviates(arg, o) {
		return true
	}
	return len(o) == 2 && o[1] != '-' && len(arg) > 1 && arg[0] == '-' && arg[1] != '-' && strings.IndexByte(arg[1:], o[1]) >= 0
}

// isAncestor reports whether dir is path or a directory above it.
func isAncestor(dir, path string) bool {
	return isCleanAncestor(filepath.Clean(dir), filepath.Clean(path))
}

// isCleanAncestor is isAncestor of two paths already clean.
func isCleanAncestor(dir, path string) bool {
	return dir == path || dir == "/" || len(path) > len(dir) && path[len(dir)] == '/' && strings.HasPrefix(path, dir)
}
