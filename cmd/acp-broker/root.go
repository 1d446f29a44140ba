package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/acp-broker/acp-broker/mcp"
	"github.com/acp-broker/acp-broker/permission"
	"github.com/acp-broker/acp-broker/rules"
	"github.com/acp-broker/acp-broker/session"
)

// version is set at link time by release builds (-ldflags "-X main.version=v1.2.3");
// otherwise the module version recorded by `go install` is used.
var version = ""

func brokerVersion() string {
	if version != "" {
		return version
	}
	if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" && info.Main.Version != "(devel)" {
		return info.Main.Version
	}
	return "devel"
}

// exitError carries a user-facing failure: one error line, optional hints,
// and the exit status to end with.
type exitError struct {
	msg   string
	hints []string
	code  int
}

func (e *exitError) Error() string { return e.msg }

func userError(code int, msg string, hints ...string) error {
	return &exitError{msg: msg, hints: hints, code: code}
}

// statusError ends the process with a status and prints nothing: the agent's
// own exit status, passed through.
type statusError int

func (s statusError) Error() string { return fmt.Sprintf("exit status %d", int(s)) }

// execute runs the command line and returns the process exit status.
func execute(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	// The keeper (see session.Keeper) stands between the broker and the
	// agent's start: it goes to its work at once, without building the
	// command line's tree of commands, and takes its arguments untouched.
	if len(args) > 0 && args[0] == session.KeeperCommand {
		return session.Keeper(args[1:], stderr)
	}
	root := newRootCmd(stdin, stdout, stderr)
	root.SetArgs(args)
	failed, err := root.ExecuteC()
	if err == nil {
		return 0
	}
	var status statusError
	if errors.As(err, &status) {
		return int(status)
	}
	var ue *exitError
	if errors.As(err, &ue) {
		fmt.Fprintf(stderr, "acp-broker: error: %s\n", ue.msg)
		for _, h := range ue.hints {
			fmt.Fprintf(stderr, "acp-broker: hint: %s\n", h)
		}
		return ue.code
	}
	// Flag and argument errors from cobra: the help to see is the
	// command's that refused them.
	fmt.Fprintf(stderr, "acp-broker: error: %s\n", err)
	fmt.Fprintf(stderr, "acp-broker: hint: see '%s --help'\n", failed.CommandPath())
	return 2
}

type rootOptions struct {
	logLevel       string
	logFile        string
	trace          string
	maxMessageSize byteSize
	shutdownGrace  time.Duration
	killGrace      time.Duration
	mode           string
	configs        []string
	audit          string
}

func newRootCmd(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	opts := &rootOptions{maxMessageSize: byteSize(session.DefaultMaxMessageSize)}
	cmd := &cobra.Command{
		Use:   "acp-broker [flags] -- AGENT [ARGS...]",
		Short: "Relay an ACP agent's stdio and decide its permission requests",
		Long: `acp-broker starts AGENT as a subprocess and relays the Agent Client Protocol
conversation between the editor (on acp-broker's stdin and stdout) and the agent,
message for message and byte for byte. Put it in front of the agent command in
your editor's configuration:

    acp-broker -- claude-agent-acp

Only ACP messages are written to stdout; logs go to stderr or --log-file.`,
		Version:       brokerVersion(),
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			// Without "--", a word that is no subcommand is the agent's
			// name; one a letter or two from a subcommand is a typo far
			// more often than an agent, and starting "rule" would hide it.
			if len(args) > 0 && cmd.ArgsLenAtDash() != 0 {
				if err := nearSubcommand(cmd, args[0]); err != nil {
					return err
				}
			}
			return runBroker(cmd.Context(), opts, args, stdin, stdout, stderr)
		},
		SuggestionsMinimumDistance: suggestionDistance,
	}
	cmd.SetIn(stdin)
	cmd.SetOut(stdout)
	cmd.SetErr(stderr)
	// Everything after the agent's name belongs to the agent, even without "--".
	cmd.Flags().SetInterspersed(false)

	f := cmd.Flags()
	f.StringVar(&opts.logLevel, "log-level", "info", "log level: "+strings.Join(logLevels, ", "))
	f.StringVar(&opts.logFile, "log-file", "", "append logs to this file instead of stderr")
	f.StringVar(&opts.trace, "trace", "", "write every message, with direction and time, as JSONL to this file")
	f.Var(&opts.maxMessageSize, "max-message-size", "largest message relayed, e.g. 64MiB; larger ones are refused with an error")
	f.DurationVar(&opts.shutdownGrace, "shutdown-grace", 5*time.Second, "after the editor closes stdin, how long the agent may take to exit before SIGTERM")
	f.DurationVar(&opts.killGrace, "kill-grace", 2*time.Second, "after SIGTERM, how long the agent may take to exit before SIGKILL")
	f.StringVar(&opts.mode, "mode", "", "permission mode: default, accept-edits, plan, dont-ask or bypass (default: the config's mode)")
	f.StringArrayVar(&opts.configs, "config", nil, "also load this rule file, as part of the user layer (repeatable)")
	f.StringVar(&opts.audit, "audit", "", `append the audit log to this file, or "off" (default: $XDG_STATE_HOME/acp-broker/audit.jsonl)`)

	cmd.AddCommand(
		newDemoCmd(stdout, stderr),
		newExampleAgentCmd(stdin, stdout),
		newRulesCmd(stdin, stdout, stderr),
		newTrustCmd(stdout, stderr),
		newVersionCmd(stdout),
		newInitCmd(stdout, stderr),
		newRememberedCmd(stdout),
		newPendingCmd(stdout),
		newAnswerCmd(stdout),
		newMCPCmd(stdout, stderr),
		newMCPProxyCmd(stdin, stdout, stderr),
	)
	// Made now rather than when the command line runs, so that the walk
	// below reaches it too.
	cmd.InitDefaultCompletionCmd()
	rejectUnknownSubcommands(cmd)
	completeFlagValues(cmd)
	return cmd
}

// suggestionDistance is how far (in letters changed, added or removed) a
// word may be from a command's name to be taken for a typo of it.
const suggestionDistance = 2

// logLevels are the --log-level values.
var logLevels = []string{"debug", "info", "warn", "error"}

func newVersionCmd(stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print acp-broker's version (the same as --version)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintf(stdout, "acp-broker version %s\n", brokerVersion())
			return err
		},
	}
}

// rejectUnknownSubcommands makes each command that only groups others
// (rules, remembered, mcp, completion) refuse a word that names none of
// them, with a usage error: cobra would print the group's help and exit 0,
// so a misspelt `acp-broker rules chek` in a CI step would pass. Given no
// word at all, the group prints its help as before.
func rejectUnknownSubcommands(c *cobra.Command) {
	for _, sub := range c.Commands() {
		rejectUnknownSubcommands(sub)
	}
	if !c.HasParent() || !c.HasSubCommands() || c.Runnable() {
		return
	}
	c.SuggestionsMinimumDistance = suggestionDistance
	c.Args = cobra.ArbitraryArgs
	c.RunE = func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return cmd.Help()
		}
		msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
		if near := cmd.SuggestionsFor(args[0]); len(near) > 0 {
			return userError(2, msg, "did you mean "+orList(near)+"?")
		}
		return userError(2, msg, fmt.Sprintf("see '%s --help'", cmd.CommandPath()))
	}
}

// nearSubcommand refuses an agent name, given without "--", that is within
// suggestionDistance of a subcommand's name or begins one: `acp-broker rule
// check` is a typo of `acp-broker rules check`, not an agent named rule.
// A path (a name with a slash) is always an agent.
func nearSubcommand(root *cobra.Command, name string) error {
	if strings.Contains(name, "/") {
		return nil
	}
	near := root.SuggestionsFor(name)
	if len(near) == 0 {
		return nil
	}
	forms := make([]string, len(near))
	for i, n := range near {
		forms[i] = "`acp-broker " + n + "`"
	}
	return userError(2, fmt.Sprintf("unknown command %q for \"acp-broker\"", name),
		fmt.Sprintf("did you mean %s? (to start an agent named %s, use `acp-broker -- %s`)", orList(forms), name, name))
}

// orList joins words as "a", "a or b", "a, b or c".
func orList(words []string) string {
	if len(words) == 1 {
		return words[0]
	}
	return strings.Join(words[:len(words)-1], ", ") + " or " + words[len(words)-1]
}

func runBroker(ctx context.Context, opts *rootOptions, agent []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(agent) == 0 {
		return userError(2, "no agent command given",
			"put the agent's command after the flags: acp-broker [flags] -- AGENT [ARGS...]")
	}
	// Every usage error is found before the agent is looked up: a
	// misspelt flag value is exit status 2 whether or not the agent exists.
	level, err := parseLevel(opts.logLevel)
	if err != nil {
		return userError(2, err.Error(), "use one of: "+strings.Join(logLevels, ", "))
	}
	if opts.mode != "" && !slices.Contains(rules.Modes, opts.mode) {
		return userError(2, fmt.Sprintf("unknown mode %q", opts.mode), "use one of: "+strings.Join(rules.Modes, ", "))
	}
	path, err := session.LookAgent(agent[0])
	if err != nil {
		var nf *session.AgentNotFoundError
		if errors.As(err, &nf) && nf.NotExecutable {
			return userError(126, err.Error(), "give the path of an executable file (check its execute permission)")
		}
		return userError(127, err.Error(), "install the agent, or give its full path after --")
	}
	logOut := session.NewLockedWriter(stderr)
	var logDest io.Writer = logOut
	if opts.logFile != "" {
		lf, err := os.OpenFile(opts.logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return userError(1, fmt.Sprintf("cannot open log file: %v", err))
		}
		defer lf.Close()
		logDest = lf
	}
	logger := slog.New(slog.NewTextHandler(logDest, &slog.HandlerOptions{Level: level}))
	if why := terminalLogin(agent, stdin, stdout); why != "" {
		logger.Info("terminal login: running the agent directly, without the broker; nothing it does is relayed or governed",
			"why", why, "agent", agent[0])
		err := execAgent(path, agent)
		return userError(1, fmt.Sprintf("cannot run the agent for the terminal login: %v", err))
	}

	var trace io.Writer
	if opts.trace != "" {
		tf, err := os.OpenFile(opts.trace, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
		if err != nil {
			return userError(1, fmt.Sprintf("cannot open trace file: %v", err))
		}
		defer tf.Close()
		trace = tf
	}

	// Catching SIGPIPE, rather than ignoring it (which the agent would inherit),
	// turns a write to an editor that went away into an EPIPE error instead of
	// killing the broker before it can stop the agent.
	sigpipe := make(chan os.Signal, 1)
	signal.Notify(sigpipe, syscall.SIGPIPE)
	defer signal.Stop(sigpipe)
	// The agent runs under this executable as its keeper, which ends the
	// agent's tree if the broker is killed with SIGKILL.
	keeper, err := os.Executable()
	if err != nil {
		return userError(1, fmt.Sprintf("cannot find the broker's own executable to keep the agent: %v", err))
	}
	// The agent starts first, so that it (and its keeper) start up while the
	// broker loads its rules. Nothing is relayed before they have loaded:
	// a broken rule file stops the agent, which was sent nothing.
	started, err := session.StartAgent(path, agent, keeper)
	if err != nil {
		return agentStartError(err)
	}
	// While the broker runs: what brokers killed with SIGKILL left behind,
	// which must not delay the relay (the temporary directory may be full),
	// and is stopped when the broker exits.
	stopCleaning := removeDeadHubs(ctx, logger)
	defer stopCleaning()
	engine, closeAudit, err := newEngine(opts, filepath.Base(agent[0]), logger)
	if err != nil {
		started.Stop(opts.killGrace, logger)
		return err
	}
	defer closeAudit()
	hub := newHub(keeper, engine, logger)
	defer hub.Close()

	code, err := session.Run(ctx, session.Options{
		AgentPath:      path,
		AgentArgs:      agent,
		Keeper:         keeper,
		Agent:          started,
		EditorIn:       stdin,
		EditorOut:      stdout,
		Stderr:         logOut,
		Logger:         logger,
		Trace:          trace,
		MaxMessageSize: int(opts.maxMessageSize),
		ShutdownGrace:  opts.shutdownGrace,
		KillGrace:      opts.killGrace,
		Policy:         engine,
		Setup:          hub,
		Initialize:     engine.RewriteInitialize,
		Started:        engine.Started,
		Modes:          engine,
	})
	if err != nil {
		return agentStartError(err)
	}
	if code != 0 {
		return statusError(code)
	}
	return nil
}

// removeDeadHubs removes, in the background, the MCP socket directories of
// this user's dead brokers (see mcp.RemoveDeadHubs). The function it
// returns stops the removal and waits until it has stopped.
func removeDeadHubs(ctx context.Context, logger *slog.Logger) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		removed := mcp.RemoveDeadHubs(ctx, os.TempDir())
		for _, dir := range removed {
			logger.Debug("removed a dead broker's MCP socket directory", "dir", dir)
		}
		logger.Debug("looked for dead brokers' MCP socket directories", "removed", len(removed))
	}()
	return func() {
		cancel()
		<-done
	}
}

// agentStartError is the failure to start an agent that LookAgent found,
// with a shell's exit status when the system would not run the agent's
// file: 127 when it found no file to run (a script whose #! interpreter is
// missing), 126 when the file cannot be run (not a format the system runs,
// no permission). Any other failure (the broker's or its keeper's own: no
// descriptors or processes left, no keeper executable) is 1.
func agentStartError(err error) error {
	var exec *session.AgentExecError
	switch {
	case !errors.As(err, &exec):
		return userError(1, err.Error())
	case exec.Errno == syscall.ENOENT:
		return userError(127, err.Error(), "if the agent is a script, check that the interpreter on its #! line exists")
	}
	return userError(126, err.Error(), "give the path of an executable file: a program, or a script starting with #!")
}

// newEngine loads every rule layer (failing on any broken managed or user
// file: nothing falls back to a looser policy; a broken project file makes
// its sessions ask for everything instead) and opens the audit log.
func newEngine(opts *rootOptions, agentName string, logger *slog.Logger) (*permission.Engine, func(), error) {
	loc, err := rules.DefaultLocations()
	if err != nil {
		return nil, nil, userError(1, err.Error())
	}
	cwd, err := os.Getwd()
	if err != nil {
		return nil, nil, userError(1, err.Error())
	}
	var protect []string
	for _, f := range []string{opts.audit, opts.trace, opts.logFile} {
		if f != "" && f != "off" {
			protect = append(protect, f)
		}
	}
	source, warnings, err := permission.NewRuleSource(rules.LoadOptions{Locations: loc, Extra: opts.configs, Protect: protect}, cwd, logger)
	if err != nil {
		return nil, nil, configError(err)
	}
	for _, w := range warnings {
		logger.Warn(w)
	}
	var audit *permission.Audit
	switch opts.audit {
	case "off":
	case "":
		audit, err = permission.OpenAudit(filepath.Join(loc.StateDir, "audit.jsonl"))
	default:
		audit, err = permission.OpenAudit(opts.audit)
	}
	if err != nil {
		return nil, nil, userError(1, fmt.Sprintf("cannot open the audit log: %v", err), `pass --audit FILE, or --audit off`)
	}
	source.AuditTo(audit, agentName)
	startPolicy, err := source.Policy(cwd)
	if err != nil {
		return nil, nil, configError(err)
	}
	asker, closeAsker, err := newAsker(startPolicy, logger)
	if err != nil {
		audit.Close()
		return nil, nil, err
	}
	engine := &permission.Engine{Rules: source, Mode: opts.mode, Audit: audit, Log: logger, Agent: agentName, Home: loc.Home, StateDir: loc.StateDir, Asker: asker, Catalog: mcp.CatalogIn(loc.StateDir)}
	return engine, func() {
		engine.Close(time.Second)
		closeAsker()
	}, nil
}

// newHub is the private channel of the MCP proxies, whose socket is opened
// when the first session set-up names a stdio MCP server. Failing to open it
// refuses that set-up rather than letting the servers run unwatched.
func newHub(exe string, engine *permission.Engine, logger *slog.Logger) *mcp.Hub {
	return &mcp.Hub{Exe: exe, Catalog: engine.Catalog, Log: logger, Policy: engine.Rules.Policy, Governor: engine}
}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(strings.ToUpper(s))); err != nil {
		return 0, fmt.Errorf("unknown log level %q", s)
	}
	return l, nil
}

// flagValues are the values the shell completes for the flags of these
// names, on every command that has one.
var flagValues = map[string][]string{
	"log-level": logLevels,
	"mode":      rules.Modes,
	"kind":      rules.Kinds,
}

// completeFlagValues registers the completion of flagValues on each
// command in the tree that has such a flag and no completion for it yet.
func completeFlagValues(c *cobra.Command) {
	for name, values := range flagValues {
		if c.LocalFlags().Lookup(name) == nil {
			continue
		}
		if _, ok := c.GetFlagCompletionFunc(name); ok {
			continue
		}
		if err := c.RegisterFlagCompletionFunc(name, cobra.FixedCompletions(values, cobra.ShellCompDirectiveNoFileComp)); err != nil {
			panic(err) // the flag exists and has no completion: cannot fail
		}
	}
	for _, sub := range c.Commands() {
		completeFlagValues(sub)
	}
}
