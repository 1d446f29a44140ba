package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/acp-broker/acp-broker/mcp"
	"github.com/acp-broker/acp-broker/rules"
)

// layerOptions are the flags that choose the rule layers to load.
type layerOptions struct {
	configs []string
	cwd     string
}

func (o *layerOptions) register(cmd *cobra.Command) {
	cmd.Flags().StringArrayVar(&o.configs, "config", nil, "also load this rule file, as part of the user layer (repeatable)")
	cmd.Flags().StringVar(&o.cwd, "cwd", "", "the session's working directory, whose .acp-broker.toml is the project layer (default: the current directory)")
}

// load reads every layer. Warnings go to stderr; a broken file is an error
// naming its file, line and column.
func (o *layerOptions) load(stderr io.Writer) (*rules.Policy, rules.Locations, string, error) {
	loc, err := rules.DefaultLocations()
	if err != nil {
		return nil, loc, "", userError(1, err.Error())
	}
	cwd := o.cwd
	if cwd == "" {
		if cwd, err = os.Getwd(); err != nil {
			return nil, loc, "", userError(1, err.Error())
		}
	}
	if cwd, err = filepath.Abs(cwd); err != nil {
		return nil, loc, "", userError(1, err.Error())
	}
	policy, warnings, err := rules.Load(rules.LoadOptions{Locations: loc, Extra: o.configs, ProjectDir: cwd})
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
			if policy.ProjectError != nil {
				// The broker runs with it, asking for everything; a check
				// says it fails.
				return configError(policy.ProjectError)
			}
			failures, ran := policy.CheckExamples(rules.Context{Cwd: cwd, Home: loc.Home})
			for _, f := range failures {
				fmt.Fprintf(stderr, "acp-broker: error: %s\n", f)
			}
			if len(failures) > 0 {
				return userError(1, fmt.Sprintf("%d of %d examples failed", len(failures), ran))
			}
			fmt.Fprintf(stdout, "%d rule files, %d rules, %d examples: ok\n", len(policy.Files), len(policy.Rules), ran)
			for _, f := range policy.Files {
				fmt.Fprintf(stdout, "  %s (%s)\n", f.Path, f.Layer)
			}
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
			policy, _, _, err := o.load(stderr)
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
			if policy.ProjectError != nil {
				fmt.Fprintf(stdout, "every request is asked: the project file is not in force (%v)\n", policy.ProjectError)
			}
			return nil
		},
	}
	o.register(cmd)
	return cmd
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
	json    bool
	kind    string
	command string
	paths   []string
	url     string
	title   string
	tool    string
	mcp     string
}

func newRulesExplainCmd(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	var o explainOptions
	cmd := &cobra.Command{
		Use:   "explain",
		Short: "Decide one permission request and say why",
		Long: `Reads a session/request_permission params object on stdin, or builds a
request from the flags, and prints the effective decision, the deciding layer,
rule and reason, and a verdict for each part of a compound command.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runExplain(&o, stdin, stdout, stderr)
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
	return cmd
}

// permissionParams is the part of session/request_permission explain reads.
type permissionParams struct {
	ToolCall json.RawMessage `json:"toolCall"`
	Options  []struct {
		Kind string `json:"kind"`
	} `json:"options"`
}

func (o *explainOptions) fromFlags() bool {
	return o.kind != "" || o.command != "" || len(o.paths) > 0 || o.url != "" || o.title != "" || o.tool != "" || o.mcp != ""
}

func runExplain(o *explainOptions, stdin io.Reader, stdout, stderr io.Writer) error {
	policy, loc, cwd, err := o.load(stderr)
	if err != nil {
		return err
	}
	var params permissionParams
	offered := map[string]bool{}
	if o.fromFlags() {
		params.ToolCall = o.toolCall()
	} else {
		data, err := io.ReadAll(stdin)
		if err != nil {
			return userError(1, err.Error())
		}
		if err := json.Unmarshal(data, &params); err != nil || params.ToolCall == nil {
			return userError(2, "stdin is not a session/request_permission params object",
				`pipe {"sessionId": ..., "toolCall": {...}, "options": [...]} in, or describe the request with --kind, --command, --path`)
		}
		for _, opt := range params.Options {
			offered[opt.Kind] = true
		}
	}
	// What the brokers' proxies last saw of each MCP tool stands in for what
	// a running broker's proxy would report.
	tools := mcp.CatalogIn(loc.StateDir)
	req := rules.ReadToolCallJSON(params.ToolCall, rules.Context{Cwd: cwd, Home: loc.Home, Mode: policy.Mode, MCPHints: tools.StoredHints})
	v := policy.Decide(req)
	effective, note := v.Decision, ""
	if len(params.Options) > 0 {
		effective, note = rules.Effective(v.Decision, offered)
	}
	if o.json {
		return json.NewEncoder(stdout).Encode(explainJSON(v, effective, note))
	}
	printExplain(stdout, v, effective, note)
	if req.MCP != nil {
		printMCPTool(stdout, tools, policy, req.MCP)
	}
	return nil
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
	Source   string     `json:"source"`
	Rule     string     `json:"rule,omitempty"`
	RuleID   string     `json:"rule_id,omitempty"`
	Layer    string     `json:"layer,omitempty"`
	Reason   string     `json:"reason"`
	Parts    []partJSON `json:"parts"`
}

func explainJSON(v rules.Verdict, effective rules.Decision, note string) verdictJSON {
	out := verdictJSON{Decision: string(effective), Source: v.Source, Reason: v.Reason}
	if effective != v.Decision {
		out.Engine, out.Source, out.Reason = string(v.Decision), "options", note
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

func printExplain(w io.Writer, v rules.Verdict, effective rules.Decision, note string) {
	fmt.Fprintf(w, "decision: %s\n", effective)
	if effective != v.Decision {
		fmt.Fprintf(w, "          (the rules say %s, but %s)\n", v.Decision, note)
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
it untrusted again.`,
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
				return userError(1, fmt.Sprintf("no %s in %s", rules.ProjectFileName, dir))
			}
			if err != nil {
				return configError(err)
			}
			fmt.Fprintf(stdout, "trusted %s (sha256 %s)\n", path, sum[:16])
			return nil
		},
	}
}

func newInitCmd(stdout io.Writer) *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:   "init",
		Short: "Write a commented starter user config",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			loc, err := rules.DefaultLocations()
			if err != nil {
				return userError(1, err.Error())
			}
			if _, err := os.Stat(loc.User); err == nil && !force {
				return userError(1, fmt.Sprintf("%s already exists", loc.User), "edit it, or pass --force to replace it")
			}
			if err := rules.WriteFileAtomic(loc.User, []byte(rules.StarterConfig)); err != nil {
				return userError(1, err.Error())
			}
			fmt.Fprintf(stdout, "wrote %s\n", loc.User)
			return nil
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "replace an existing config")
	return cmd
}
