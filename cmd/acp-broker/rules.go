package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/acp-broker/acp-broker/mcp"
	"github.com/acp-broker/acp-broker/permission"
	"github.com/acp-broker/acp-broker/rules"
	"github.com/acp-broker/acp-broker/session"
)

// layerOptions are the flags that choose the rule layers to load.
type layerOptions struct {
	configs []string
	cwd     string
	// protect are more files the broker protects: a running broker's own
	// --audit, --trace and --log-file (explain's --protect).
	protect []string
}

func (o *layerOptions) register(cmd *cobra.Command) {
	cmd.Flags().StringArrayVar(&o.configs, "config", nil, "also load this rule file, as part of the user layer (repeatable)")
	cmd.Flags().StringVar(&o.cwd, "cwd", "", "the session's working directory, where the project files are looked up from (default: the current directory)")
}

// load reads every layer. Warnings go to stderr; a broken file is an error
// naming its file, line and column.
func (o *layerOptions) load(stderr io.Writer) (*rules.Policy, rules.Locations, string, error) {
	cwd, err := o.dir()
	if err != nil {
		return nil, rules.Locations{}, "", err
	}
	return o.loadFor(stderr, cwd)
}

// dir is the --cwd given, or the current directory, made absolute.
func (o *layerOptions) dir() (string, error) {
	cwd := o.cwd
	var err error
	if cwd == "" {
		if cwd, err = os.Getwd(); err != nil {
			return "", userError(1, err.Error())
		}
	}
	if cwd, err = filepath.Abs(cwd); err != nil {
		return "", userError(1, err.Error())
	}
	return cwd, nil
}

// loadFor reads every layer for a session in cwd; "" is a session whose
// directory is unknown, which has no project layer.
func (o *layerOptions) loadFor(stderr io.Writer, cwd string) (*rules.Policy, rules.Locations, string, error) {
	loc, err := rules.DefaultLocations()
	if err != nil {
		return nil, loc, "", userError(1, err.Error())
	}
	policy, warnings, err := rules.Load(rules.LoadOptions{Locations: loc, Extra: o.configs, ProjectDir: cwd, Protect: o.protect})
	if err != nil {
		return nil, loc, cwd, configError(err)
	}
	for _, w := range warnings {
		fmt.Fprintf(stderr, "acp-broker: warning: %s\n", w)
	}
	return policy, loc, cwd, nil
}

// configError turns a rule-file problem into the user-facing error and hint.
func configError(err error) error {
	var ce *rules.ConfigError
	if errors.As(err, &ce) {
		if ce.Hint != "" {
			return userError(1, ce.Error(), ce.Hint)
		}
		return userError(1, ce.Error())
	}
	return userError(1, err.Error())
}

func newRulesCmd(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "rules",
		Short: "Check, list and explain the permission rules",
	}
	cmd.AddCommand(newRulesCheckCmd(stdout, stderr), newRulesListCmd(stdout, stderr), newRulesExplainCmd(stdin, stdout, stderr))
	return cmd
}

func newRulesCheckCmd(stdout, stderr io.Writer) *cobra.Command {
	var o layerOptions
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Validate every rule layer and run the rules' examples",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			policy, loc, cwd, err := o.load(stderr)
			if err != nil {
				return err
			}
			for _, w := range policy.BlindSpots() {
				fmt.Fprintf(stderr, "acp-broker: warning: %s\n", w)
			}
			errs := 0
			for _, p := range policy.Problems(rules.Environment{Getenv: os.Getenv, LookPath: exec.LookPath, UserConfig: loc.User}) {
				fmt.Fprintf(stderr, "acp-broker: %s: %s\n", p.Severity, p)
				if p.Hint != "" {
					fmt.Fprintf(stderr, "acp-broker: hint: %s\n", p.Hint)
				}
				if p.Severity == rules.Error {
					errs++
				}
			}
			if policy.ProjectError != nil {
				// The broker runs with it, asking for everything; a check
				// says it fails.
				return configError(policy.ProjectError)
			}
			failures, ran := policy.CheckExamples(rules.Context{Cwd: cwd, Home: loc.Home})
			for _, f := range failures {
				fmt.Fprintf(stderr, "acp-broker: error: %s\n", f)
			}
			switch {
			case len(failures) > 0 && errs > 0:
				return userError(1, fmt.Sprintf("%d of %d examples failed, and %s", len(failures), ran, plural(errs, "set-up error")))
			case len(failures) > 0:
				return userError(1, fmt.Sprintf("%d of %d examples failed", len(failures), ran))
			case errs > 0:
				return userError(1, plural(errs, "set-up error"))
			}
			fmt.Fprintf(stdout, "%d rule files, %d rules, %d examples: ok\n", len(policy.Files), len(policy.Rules), ran)
			printFiles(stdout, policy)
			return nil
		},
	}
	o.register(cmd)
	return cmd
}

func newRulesListCmd(stdout, stderr io.Writer) *cobra.Command {
	var o layerOptions
	cmd := &cobra.Command{
		Use:   "list",
		Short: "Print the effective rules with their file, line and layer",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			policy, loc, cwd, err := o.load(stderr)
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "DECISION\tRULE\tMATCHES\tWHERE\tLAYER")
			for _, r := range policy.Rules {
				decision := string(r.Decision)
				if r.Inactive {
					decision += " (untrusted, off)"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", decision, r.ID, describeRule(r), r.Where(), r.Layer)
			}
			tw.Flush()
			fmt.Fprintf(stdout, "\nread_only = %q", policy.ReadOnly)
			if policy.Mode != "" {
				fmt.Fprintf(stdout, ", mode = %q", policy.Mode)
			}
			fmt.Fprintln(stdout)
			for _, line := range projectLines(policy, cwd, loc.Home) {
				fmt.Fprintf(stdout, "project:  %s\n", line)
			}
			if policy.ProjectError != nil {
				fmt.Fprintf(stdout, "every request is asked: the project file is not in force (%v)\n", policy.ProjectError)
			}
			return nil
		},
	}
	o.register(cmd)
	return cmd
}

// printFiles lists the rule files in force, one a line, with their layer
// and, for a project file, whether it is trusted.
func printFiles(w io.Writer, policy *rules.Policy) {
	for _, f := range policy.Files {
		note := string(f.Layer)
		if f.Layer == rules.Project {
			note += ", " + trustWord(f)
		}
		fmt.Fprintf(w, "  %s (%s)\n", f.Path, note)
	}
}

func trustWord(f *rules.File) string {
	if f.Trusted {
		return "trusted"
	}
	return "untrusted"
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// projectLines say which project files apply to a session in cwd, nearest
// first, or where none was found.
func projectLines(policy *rules.Policy, cwd, home string) []string {
	var lines []string
	for _, f := range policy.ProjectFiles() {
		lines = append(lines, fmt.Sprintf("%s (%s)", f.Path, trustWord(f)))
	}
	if len(lines) > 0 || policy.ProjectError != nil {
		return lines
	}
	looked := rules.ProjectFiles(cwd, home)
	switch len(looked) {
	case 0:
		return []string{"none (no project file is read for a session in " + cwd + ")"}
	case 1:
		return []string{"none (" + looked[0] + " does not exist)"}
	}
	return []string{fmt.Sprintf("none (no %s from %s up to %s)", rules.ProjectFileName, cwd, filepath.Dir(looked[len(looked)-1]))}
}

// describeRule summarises a rule's matchers on one line.
func describeRule(r *rules.Rule) string {
	var parts []string
	add := func(name string, values []string) {
		if len(values) > 0 {
			parts = append(parts, fmt.Sprintf("%s=%s", name, strings.Join(values, "|")))
		}
	}
	add("kind", r.Kinds)
	add("modes", r.Modes)
	for _, m := range r.Matchers() {
		add(m.Name, m.Patterns)
	}
	if r.UnlockProtected {
		parts = append(parts, "unlock_protected")
	}
	return strings.Join(parts, " ")
}

type explainOptions struct {
	layerOptions
	json       bool
	kind       string
	command    string
	paths      []string
	url        string
	title      string
	tool       string
	mcp        string
	mode       string
	agent      string
	agentMode  string
	dirs       []string
	transcript string
}

func newRulesExplainCmd(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	var o explainOptions
	cmd := &cobra.Command{
		Use:   "explain",
		Short: "Decide one permission request and say why",
		Long: `Reads a session/request_permission params object on stdin, or builds a
request from the flags, and prints the effective decision, the deciding layer,
rule and reason, and a verdict for each part of a compound command.

The request is decided by the code the live broker runs: its params read
exactly, the mode applied, and the option of the decided kind chosen; a
request that offers no such option is asked. A request built from the flags
offers allow_once and reject_once.

The mode is --mode, else the one the agent's own mode stands for (--agent
and --agent-mode, or what a transcript shows), else the config's, as live.
The broker protects its own audit log, trace and log file: give those of
the running broker with --protect.

--transcript replays what the agent and the editor sent before the request,
as the broker's --trace file records it (or lines {"dir":"agent","message":
{...}} and {"dir":"editor",...}): the session's directories, agent and mode
come from its initialize, session/new and mode updates, and the tool call is
merged with its session/update messages as live. --cwd,
--additional-directory, --agent and --agent-mode, when given, replace what
it says. What explain cannot know: answers remembered for one session only,
and the channels a human would be asked on.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runExplain(cmd, &o, stdin, stdout, stderr)
		},
	}
	o.register(cmd)
	f := cmd.Flags()
	f.BoolVar(&o.json, "json", false, "print the verdict as JSON")
	f.StringVar(&o.kind, "kind", "", "the tool kind (read, edit, execute, ...)")
	f.StringVar(&o.command, "command", "", "a shell command")
	f.StringArrayVar(&o.paths, "path", nil, "a path the tool touches (repeatable)")
	f.StringVar(&o.url, "url", "", "a URL the tool fetches")
	f.StringVar(&o.title, "title", "", "the tool call's title")
	f.StringVar(&o.tool, "tool", "", "the tool's name")
	f.StringVar(&o.mcp, "mcp", "", "an MCP tool, as server/tool")
	f.StringVar(&o.mode, "mode", "", "the broker's --mode (default: the agent's mode, else the config's)")
	f.StringVar(&o.agent, "agent", "", "the agent, as its initialize names it (agentInfo.name)")
	f.StringVar(&o.agentMode, "agent-mode", "", "the session's mode as the agent reports it (Claude Code's plan, acceptEdits, ...)")
	f.StringArrayVar(&o.protect, "protect", nil, "a file the running broker writes and so protects: its --audit, --trace or --log-file (repeatable)")
	f.StringArrayVar(&o.dirs, "additional-directory", nil, "one of the session's additionalDirectories (repeatable)")
	f.StringVar(&o.transcript, "transcript", "", "replay this JSONL transcript of the session first (a --trace file)")
	// --mode and --kind complete as on every command (completeFlagValues).
	cmd.RegisterFlagCompletionFunc("agent", cobra.FixedCompletions(knownAgentNames(), cobra.ShellCompDirectiveNoFileComp))
	cmd.RegisterFlagCompletionFunc("agent-mode", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return knownAgentModes(o.agent), cobra.ShellCompDirectiveNoFileComp
	})
	return cmd
}

// knownAgentNames are the agentInfo.name values of the agents whose modes
// the broker knows.
func knownAgentNames() []string {
	var names []string
	for _, a := range rules.KnownAgents {
		names = append(names, a.Names...)
	}
	return names
}

// knownAgentModes are the modes the broker knows of the agent named (of
// every known agent when none is).
func knownAgentModes(agent string) []string {
	var modes []string
	if agent != "" {
		if a := rules.KnownAgent(agent); a != nil {
			modes = a.KnownModes()
		}
	} else {
		for _, a := range rules.KnownAgents {
			modes = append(modes, a.KnownModes()...)
		}
	}
	slices.Sort(modes)
	return slices.Compact(modes)
}

func (o *explainOptions) fromFlags() bool {
	return o.kind != "" || o.command != "" || len(o.paths) > 0 || o.url != "" || o.title != "" || o.tool != "" || o.mcp != ""
}

// flagOptions are what a request built from the flags offers.
const flagOptions = `[{"optionId":"allow","name":"Allow","kind":"allow_once"},{"optionId":"reject","name":"Reject","kind":"reject_once"}]`

func runExplain(cmd *cobra.Command, o *explainOptions, stdin io.Reader, stdout, stderr io.Writer) error {
	if o.mode != "" && !slices.Contains(rules.Modes, o.mode) {
		return userError(2, fmt.Sprintf("unknown mode %q", o.mode), "use one of: "+strings.Join(rules.Modes, ", "))
	}
	var params json.RawMessage
	if o.fromFlags() {
		params = json.RawMessage(`{"sessionId":"explain","toolCall":` + string(o.toolCall()) + `,"options":` + flagOptions + `}`)
	} else {
		data, err := io.ReadAll(stdin)
		if err != nil {
			return userError(1, err.Error())
		}
		params = bytes.TrimSpace(data)
		if !json.Valid(params) || len(params) == 0 || params[0] != '{' {
			return userError(2, "stdin is not a session/request_permission params object",
				`pipe {"sessionId": ..., "toolCall": {...}, "options": [...]} in, or describe the request with --kind, --command, --path`)
		}
	}
	replay := session.NewReplay()
	if o.transcript != "" {
		if err := replayFile(replay, o.transcript); err != nil {
			return userError(1, err.Error())
		}
	}
	info, toolCall := replay.Intercepted("session/request_permission", params)
	if o.transcript == "" {
		// The flags describe the session: one the editor opened.
		info.Opened = true
	}
	if o.transcript == "" || cmd.Flags().Changed("cwd") {
		cwd, err := o.dir()
		if err != nil {
			return err
		}
		info.Cwd = cwd
	}
	if o.transcript == "" || cmd.Flags().Changed("additional-directory") {
		info.AdditionalDirectories = o.dirs
	}
	if o.transcript == "" || cmd.Flags().Changed("agent") {
		info.Agent = o.agent
	}
	if o.transcript == "" || cmd.Flags().Changed("agent-mode") {
		info.AgentMode = o.agentMode
	}
	if o.agentMode != "" && info.Agent == "" {
		return userError(2, "--agent-mode without the agent: an agent's modes mean something only for the agent named",
			"add --agent, one of: "+strings.Join(knownAgentNames(), ", "))
	}
	policy, loc, _, err := o.loadFor(stderr, info.Cwd)
	if err != nil {
		return err
	}
	// What the brokers' proxies last saw of each MCP tool stands in for what
	// a running broker's proxy would report.
	tools := mcp.CatalogIn(loc.StateDir)
	hints := tools.StoredHints
	if o.transcript != "" {
		// As live, a server's hints count only in a session whose own
		// server of that name the broker proxies.
		proxied := mcp.Proxied(info.MCPServers, policy)
		hints = func(server, tool string) rules.ToolHints {
			if !proxied[server] {
				return rules.ToolHints{}
			}
			return tools.StoredHints(server, tool)
		}
	}
	if why := session.Refused("session/request_permission", nil, params); why != "" {
		// The relay answers such a request with an error before any rule
		// sees it.
		if o.json {
			return json.NewEncoder(stdout).Encode(verdictJSON{Decision: "refused", Source: "relay", Reason: why})
		}
		fmt.Fprintf(stdout, "decision: refused\n          (the broker answers it with an error: %s)\n", why)
		return nil
	}
	ev := permission.Evaluate(permission.Inputs{Params: params, ToolCall: toolCall, Session: info, Policy: policy,
		Mode: permission.SessionMode(o.mode, policy, info), Home: loc.Home, MCPHints: hints})
	caveats := explainCaveats(ev, policy)
	if o.json {
		v := explainJSON(ev)
		v.Caveats = caveats
		for _, f := range policy.ProjectFiles() {
			v.ProjectFiles = append(v.ProjectFiles, projectFileJSON{Path: f.Path, Trusted: f.Trusted})
		}
		return json.NewEncoder(stdout).Encode(v)
	}
	printExplain(stdout, ev)
	for _, line := range projectLines(policy, info.Cwd, loc.Home) {
		fmt.Fprintf(stdout, "project:  %s\n", line)
	}
	for _, c := range caveats {
		fmt.Fprintf(stdout, "caveat:   %s\n", c)
	}
	if ev.Request.MCP != nil {
		printMCPTool(stdout, tools, policy, ev.Request.MCP)
	}
	return nil
}

// explainCaveats names the state a running broker would decide this
// request with that explain cannot know, where it could change the decision.
func explainCaveats(ev permission.Evaluation, policy *rules.Policy) []string {
	var out []string
	if ev.Decision == rules.Ask && ev.Understood && policy.Remember == "session" {
		out = append(out, `remember = "session": a running broker may allow or deny this from an "always" answered earlier in the session, which only it knows`)
	}
	if ev.Decision == rules.Ask && policy.ProjectError != nil {
		out = append(out, "the project file is not in force: a running broker that read an earlier version of it keeps that version's deny rules, and may deny this")
	}
	if ev.Request.MCP != nil {
		out = append(out, "MCP tool hints come from the stored catalog; a running broker's proxy may know the tool list changed since (list_changed), and then asks")
	}
	return out
}

// replayFile feeds a transcript to the replay, line by line.
func replayFile(r *session.Replay, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 64<<10)
	for {
		line, err := br.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			r.Record(bytes.TrimSpace(line))
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading %s: %w", path, err)
		}
	}
}

// printMCPTool shows what is known of an MCP tool's annotations.
func printMCPTool(w io.Writer, c *mcp.Catalog, policy *rules.Policy, tool *rules.MCPTool) {
	rows, err := toolRows(c, policy, "")
	if err != nil {
		fmt.Fprintf(w, "mcp tool: %s: the catalog cannot be read: %v\n", tool.String(), err)
		return
	}
	for _, r := range rows {
		if r.Server == tool.Server && r.Tool == tool.Tool {
			ann := string(r.Annotations)
			if ann == "" {
				ann = "none"
			}
			fmt.Fprintf(w, "mcp tool: %s: annotations %s; %s server; %s; %s\n", tool.String(), ann, r.Trust, r.Pinned, r.Effect)
			return
		}
	}
	fmt.Fprintf(w, "mcp tool: %s: never listed through the broker's proxy; its annotations are unknown\n", tool.String())
}

func (o *explainOptions) toolCall() json.RawMessage {
	tc := map[string]json.RawMessage{}
	set := func(k string, v any) {
		b, _ := json.Marshal(v)
		tc[k] = b
	}
	kind := o.kind
	input := map[string]any{}
	if o.command != "" {
		input["command"] = o.command
		if kind == "" {
			kind = "execute"
		}
	}
	if o.url != "" {
		input["url"] = o.url
		if kind == "" {
			kind = "fetch"
		}
	}
	if kind != "" {
		set("kind", kind)
	}
	if o.title != "" {
		set("title", o.title)
	}
	if o.tool != "" {
		set("name", o.tool)
	}
	if server, tool, ok := strings.Cut(o.mcp, "/"); ok {
		// As Codex sends an MCP call.
		input["server"], input["tool"] = server, tool
		if kind == "" {
			kind = "other"
		}
	}
	if len(input) > 0 {
		set("rawInput", input)
	}
	if len(o.paths) > 0 {
		locs := make([]map[string]string, len(o.paths))
		for i, p := range o.paths {
			locs[i] = map[string]string{"path": p}
		}
		set("locations", locs)
	}
	set("toolCallId", "explain")
	b, _ := json.Marshal(tc)
	return b
}

type partJSON struct {
	Action   string `json:"action"`
	Decision string `json:"decision"`
	Source   string `json:"source"`
	Rule     string `json:"rule,omitempty"`
	Layer    string `json:"layer,omitempty"`
	Reason   string `json:"reason,omitempty"`
}

type verdictJSON struct {
	Decision string     `json:"decision"`
	Engine   string     `json:"engine_decision,omitempty"`
	Option   string     `json:"option,omitempty"`
	Source   string     `json:"source"`
	Rule     string     `json:"rule,omitempty"`
	RuleID   string     `json:"rule_id,omitempty"`
	Layer    string     `json:"layer,omitempty"`
	Reason   string     `json:"reason"`
	Parts    []partJSON `json:"parts"`
	// Caveats name what a running broker may know and explain cannot
	// (answers remembered for the session only, a proxy's list_changed).
	Caveats []string `json:"caveats,omitempty"`
	// ProjectFiles are the project files in force, nearest the session
	// first.
	ProjectFiles []projectFileJSON `json:"project_files,omitempty"`
}

type projectFileJSON struct {
	Path    string `json:"path"`
	Trusted bool   `json:"trusted"`
}

// explainJSON is the evaluation as --json prints it: "decision" is what the
// broker does; when that differs from the rules' verdict, "engine_decision"
// is the verdict and "source" and "reason" say why.
func explainJSON(ev permission.Evaluation) verdictJSON {
	v := ev.Verdict
	out := verdictJSON{Decision: string(ev.Decision), Option: ev.Option.OptionID, Source: v.Source, Reason: v.Reason}
	if !ev.Understood {
		out.Source, out.Reason = ev.Source, ev.Reason
	} else if ev.Decision != v.Decision {
		out.Engine, out.Source, out.Reason = string(v.Decision), "options", ev.NoOption
	}
	if v.Rule != nil {
		out.Rule, out.RuleID, out.Layer = v.Rule.Where(), v.Rule.ID, string(v.Rule.Layer)
	}
	for _, p := range v.Parts {
		pj := partJSON{Action: p.Action, Decision: string(p.Decision), Source: p.Source, Reason: p.Reason}
		if p.Rule != nil {
			pj.Rule, pj.Layer = p.Rule.Where(), string(p.Rule.Layer)
		}
		out.Parts = append(out.Parts, pj)
	}
	return out
}

func printExplain(w io.Writer, ev permission.Evaluation) {
	v := ev.Verdict
	fmt.Fprintf(w, "decision: %s\n", ev.Decision)
	switch {
	case !ev.Understood:
		fmt.Fprintf(w, "          (not decided: %s)\n", ev.Reason)
		return
	case ev.Decision != v.Decision:
		fmt.Fprintf(w, "          (the rules say %s, but %s)\n", v.Decision, ev.NoOption)
	case ev.Option.OptionID != "":
		fmt.Fprintf(w, "option:   %s (%s)\n", ev.Option.OptionID, ev.Option.Kind)
	}
	fmt.Fprintf(w, "source:   %s\n", v.Source)
	if v.Rule != nil {
		fmt.Fprintf(w, "rule:     %s (%s layer)\n", ruleLabel(v.Rule), v.Rule.Layer)
	}
	if v.Reason != "" {
		fmt.Fprintf(w, "reason:   %s\n", v.Reason)
	}
	fmt.Fprintln(w, "parts:")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, p := range v.Parts {
		why := p.Source
		if p.Rule != nil {
			why = "rule " + ruleLabel(p.Rule)
		}
		if p.Reason != "" {
			why += ": " + p.Reason
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", p.Decision, p.Action, why)
	}
	tw.Flush()
}

func ruleLabel(r *rules.Rule) string {
	if r.Layer == rules.Remembered {
		return "remembered answer " + r.ID
	}
	if r.ID != "" {
		return fmt.Sprintf("%s (%s)", r.ID, r.Where())
	}
	return r.Where()
}

func newTrustCmd(stdout, stderr io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "trust [DIR]",
		Short: "Trust the .acp-broker.toml in DIR (default: here) with its current content",
		Long: `A project's .acp-broker.toml comes with the repository and may be hostile.
Its ask and deny rules always apply; its allow rules and loosening settings
apply only after you trust its exact content. Read the file first: this
command records its path and SHA-256, and any later change to the file makes
it untrusted again. A session reads the .acp-broker.toml of its directory
and of each one above it, up to your home inside it and up to the
repository's root outside it: each is trusted by itself, in its own directory.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := "."
			if len(args) == 1 {
				dir = args[0]
			}
			loc, err := rules.DefaultLocations()
			if err != nil {
				return userError(1, err.Error())
			}
			path, sum, err := rules.Trust(loc.StateDir, dir)
			if errors.Is(err, fs.ErrNotExist) {
				// Trust is of one file, by its path: the one a session here
				// reads from above must be named.
				var hints []string
				if abs, err := filepath.Abs(dir); err == nil {
					for _, p := range rules.ProjectFiles(abs, loc.Home) {
						if _, err := os.Lstat(p); err == nil {
							hints = append(hints, fmt.Sprintf("a session here reads %s: read it, then acp-broker trust %s", p, filepath.Dir(p)))
						}
					}
				}
				return userError(1, fmt.Sprintf("no %s in %s", rules.ProjectFileName, dir), hints...)
			}
			if err != nil {
				return configError(err)
			}
			fmt.Fprintf(stdout, "trusted %s (sha256 %s)\n", path, sum[:16])
			return nil
		},
	}
}

func newInitCmd(stdout, stderr io.Writer) *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:   "init",
		Short: "Write a commented starter user config",
		Long: `Writes a commented starter config to the user's config file
(~/.config/acp-broker/config.toml, or under $XDG_CONFIG_HOME). An existing
file is left alone unless --force is given; then it is kept as
config.toml.bak (or config.toml.bak.1, .bak.2, ... if that exists: a backup
is never overwritten) before the starter config replaces it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			loc, err := rules.DefaultLocations()
			if err != nil {
				return userError(1, err.Error())
			}
			if _, err := os.Lstat(loc.User); err == nil {
				if !force {
					return userError(1, fmt.Sprintf("%s already exists", loc.User),
						"edit it, or pass --force to replace it (the old file is then kept as "+filepath.Base(loc.User)+".bak)")
				}
				bak, err := backUp(loc.User)
				if err != nil {
					return userError(1, fmt.Sprintf("cannot keep a backup of %s, so it is not replaced: %v", loc.User, err))
				}
				fmt.Fprintf(stderr, "acp-broker: kept the old config as %s\n", bak)
			}
			if err := rules.WriteFileAtomic(loc.User, []byte(rules.StarterConfig)); err != nil {
				return userError(1, err.Error())
			}
			fmt.Fprintf(stdout, "wrote %s\n", loc.User)
			return nil
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "replace an existing config, keeping it as config.toml.bak")
	return cmd
}

// backUp copies the file at path to the first of path.bak, path.bak.1,
// path.bak.2, ... that does not exist, and returns its name. It never
// overwrites a file: after two `init --force`, the first backup may hold
// the only copy of the user's own rules.
func backUp(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	for n := 0; ; n++ {
		bak := path + ".bak"
		if n > 0 {
			bak += fmt.Sprintf(".%d", n)
		}
		f, err := os.OpenFile(bak, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return "", err
		}
		_, err = f.Write(data)
		if err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(bak)
			return "", err
		}
		return bak, nil
	}
}
