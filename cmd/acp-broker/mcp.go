package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/acp-broker/acp-broker/mcp"
	"github.com/acp-broker/acp-broker/rules"
)

// newMCPProxyCmd is what the agent starts in place of a stdio MCP server
// once the broker has rewritten the session set-up. Users do not run it.
func newMCPProxyCmd(stdin io.Reader, stdout io.Writer, stderr io.Writer) *cobra.Command {
	var o mcp.ProxyOptions
	cmd := &cobra.Command{
		Use:    mcp.ProxyCommand + " --socket PATH --token TOKEN --server NAME -- COMMAND [ARGS...]",
		Short:  "Relay one MCP server for the broker that started the agent (written into the session set-up)",
		Hidden: true,
		Args:   cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.Socket == "" || o.Token == "" {
				return userError(2, "mcp-proxy needs --socket and --token", "it is started by acp-broker's rewrite of the session set-up, not by hand")
			}
			o.Command, o.Stdin, o.Stdout, o.Stderr = args, stdin, stdout, os.Stderr
			o.Log = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo})).With("component", "acp-broker mcp-proxy")
			code, err := mcp.RunProxy(cmd.Context(), o)
			if err != nil {
				return userError(1, "mcp-proxy: "+err.Error())
			}
			if code != 0 {
				return statusError(code)
			}
			return nil
		},
	}
	cmd.Flags().SetInterspersed(false)
	cmd.Flags().StringVar(&o.Socket, "socket", "", "the broker's private socket")
	cmd.Flags().StringVar(&o.Token, "token", "", "this server entry's token")
	cmd.Flags().StringVar(&o.Server, "server", "", "the server's name in the session set-up")
	return cmd
}

func newMCPCmd(stdout, stderr io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "Show the MCP tools the broker has seen, and accept changed annotations",
		Long: `The broker runs each stdio MCP server the editor passes to the agent through
'acp-broker mcp-proxy', which reports the server's tools and their annotations.
Annotations are pinned per server and tool the first time they are seen; a tool
whose annotations or description later differ loses any read-only relaxation
until you accept the change.`,
	}
	cmd.AddCommand(newMCPToolsCmd(stdout, stderr), newMCPAcceptCmd(stdout), newMCPForgetCmd(stdout))
	return cmd
}

func catalog() (*mcp.Catalog, error) {
	loc, err := rules.DefaultLocations()
	if err != nil {
		return nil, userError(1, err.Error())
	}
	return mcp.CatalogIn(loc.StateDir), nil
}

// toolRow is one tool as `mcp tools` shows it.
type toolRow struct {
	Server      string          `json:"server"`
	Tool        string          `json:"tool"`
	Annotations json.RawMessage `json:"annotations,omitempty"`
	// Trust is "trusted" when the server's annotations may relax the
	// default (trust_annotations), else "untrusted".
	Trust    string   `json:"trust"`
	ReadOnly bool     `json:"read_only_hint"`
	Pinned   string   `json:"pinned"` // "pinned", or how the tool changed
	Effect   string   `json:"effect"` // what the annotations do to the default
	Sessions []string `json:"sessions,omitempty"`
}

func toolRows(c *mcp.Catalog, policy *rules.Policy, session string) ([]toolRow, error) {
	servers, err := c.Load()
	if err != nil {
		return nil, err
	}
	var rows []toolRow
	for _, server := range sorted(servers) {
		for _, name := range sorted(servers[server]) {
			r := servers[server][name]
			if session != "" && !slices.Contains(r.Sessions, session) {
				continue
			}
			row := toolRow{Server: server, Tool: name, Annotations: compact(r.Seen.Annotations), ReadOnly: r.ReadOnly(), Sessions: r.Sessions, Trust: "untrusted", Pinned: "pinned"}
			if d := r.Changed(); d != "" {
				row.Pinned = "changed: " + d
			}
			trusted := policy != nil && policy.TrustsAnnotations(server)
			if trusted {
				row.Trust = "trusted"
			}
			switch {
			case !r.ReadOnly():
				row.Effect = "asked (not read-only)"
			case !trusted:
				row.Effect = "asked (annotations not trusted)"
			case row.Pinned != "pinned":
				row.Effect = "asked (changed since pinned)"
			default:
				row.Effect = "read-only default"
			}
			rows = append(rows, row)
		}
	}
	return rows, nil
}

func compact(raw json.RawMessage) json.RawMessage {
	var buf bytes.Buffer
	if json.Compact(&buf, raw) != nil {
		return raw
	}
	return buf.Bytes()
}

func sorted[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func newMCPToolsCmd(stdout, stderr io.Writer) *cobra.Command {
	var layers layerOptions
	var session string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "tools",
		Short: "List each MCP tool seen: its annotations, whether they are trusted, and whether they still match their pin",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			policy, loc, _, err := layers.load(stderr)
			if err != nil {
				return err
			}
			rows, err := toolRows(mcp.CatalogIn(loc.StateDir), policy, session)
			if err != nil {
				return userError(1, err.Error(), "the file is left as it is; fix or remove it by hand")
			}
			if asJSON {
				if rows == nil {
					rows = []toolRow{} // [] rather than null
				}
				enc := json.NewEncoder(stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(rows)
			}
			if len(rows) == 0 {
				fmt.Fprintln(stdout, "No MCP tools seen yet. They are listed once an agent lists a proxied server's tools.")
				return nil
			}
			tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "SERVER\tTOOL\tANNOTATIONS\tTRUST\tPINNED\tEFFECT")
			for _, r := range rows {
				ann := string(r.Annotations)
				if ann == "" {
					ann = "-"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Server, r.Tool, ann, r.Trust, r.Pinned, r.Effect)
			}
			return tw.Flush()
		},
	}
	layers.register(cmd)
	cmd.Flags().StringVar(&session, "session", "", "only the tools listed in this ACP session")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func newMCPAcceptCmd(stdout io.Writer) *cobra.Command {
	return catalogCmd("accept", true, "Pin what a server's tools now say, after you have checked the change", func(c *mcp.Catalog, server, tool string) error {
		accepted, err := c.Accept(server, tool)
		if err != nil {
			return userError(1, err.Error())
		}
		if len(accepted) == 0 {
			fmt.Fprintf(stdout, "Nothing to accept: no tool of %s differs from its pin.\n", server)
			return nil
		}
		fmt.Fprintf(stdout, "Pinned anew: %s/%s\n", server, strings.Join(accepted, ", "+server+"/"))
		return nil
	})
}

func newMCPForgetCmd(stdout io.Writer) *cobra.Command {
	return catalogCmd("forget", false, "Remove a server's tools from the catalog; they are pinned anew when next listed", func(c *mcp.Catalog, server, tool string) error {
		n, err := c.Forget(server, tool)
		if err != nil {
			return userError(1, err.Error())
		}
		fmt.Fprintf(stdout, "Forgot %d tool(s) of %s.\n", n, server)
		return nil
	})
}

// catalogCmd is a command that changes the catalog for a server's tools, or
// one of them. Its completion offers the servers and tools in the catalog;
// onlyChanged, those whose tools differ from their pins.
func catalogCmd(name string, onlyChanged bool, short string, change func(c *mcp.Catalog, server, tool string) error) *cobra.Command {
	return &cobra.Command{
		Use:   name + " SERVER [TOOL]",
		Short: short,
		Args:  cobra.RangeArgs(1, 2),
		ValidArgsFunction: func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
			c, err := catalog()
			if err != nil {
				return nil, cobra.ShellCompDirectiveError
			}
			servers, err := c.Load()
			if err != nil {
				return nil, cobra.ShellCompDirectiveError
			}
			return catalogCompletions(servers, args, toComplete, onlyChanged), cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := catalog()
			if err != nil {
				return err
			}
			tool := ""
			if len(args) == 2 {
				tool = args[1]
			}
			return change(c, args[0], tool)
		},
	}
}

// catalogCompletions are the words that may come next after args on the
// command line of `mcp accept|forget SERVER [TOOL]`: a server, then one of
// its tools, each described by how it differs from its pin.
func catalogCompletions(servers map[string]map[string]*mcp.Record, args []string, toComplete string, onlyChanged bool) []cobra.Completion {
	var words []cobra.Completion
	switch len(args) {
	case 0:
		for _, server := range sorted(servers) {
			var changed []string
			for _, tool := range sorted(servers[server]) {
				if servers[server][tool].Changed() != "" {
					changed = append(changed, tool)
				}
			}
			if (onlyChanged && len(changed) == 0) || !strings.HasPrefix(server, toComplete) || !completable(server) {
				continue
			}
			desc := fmt.Sprintf("%d tools", len(servers[server]))
			if len(changed) > 0 {
				desc += fmt.Sprintf(", %d changed since pinned", len(changed))
			}
			words = append(words, cobra.CompletionWithDesc(server, desc))
		}
	case 1:
		tools := servers[args[0]]
		for _, tool := range sorted(tools) {
			d := tools[tool].Changed()
			if (onlyChanged && d == "") || !strings.HasPrefix(tool, toComplete) || !completable(tool) {
				continue
			}
			desc := "pinned"
			if d != "" {
				desc = "changed: " + d
			}
			words = append(words, cobra.CompletionWithDesc(tool, printable(desc)))
		}
	}
	return words
}
