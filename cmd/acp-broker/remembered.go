package main

import (
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/acp-broker/acp-broker/notify"
	"github.com/acp-broker/acp-broker/rules"
)

func newRememberedCmd(stdout io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "remembered",
		Short: `List and revoke the answers you gave "always"`,
		Long: `When you answer a request with an "always" option, the broker remembers a
narrow decision derived from it (a known program's subcommand as a prefix that
never covers its options that run code or write elsewhere, else the exact
command; an exact path; an MCP tool; a domain), for the session, the project or all projects
(remember = "session" | "project" | "user" in the config; project by default).
Running brokers stop applying a revoked entry at their next request.`,
	}
	cmd.AddCommand(newRememberedListCmd(stdout), newRememberedRevokeCmd(stdout), newRememberedClearCmd(stdout))
	return cmd
}

func rememberedStore() (rules.Store, error) {
	loc, err := rules.DefaultLocations()
	if err != nil {
		return rules.Store{}, userError(1, err.Error())
	}
	return rules.StoreIn(loc.StateDir), nil
}

func newRememberedListCmd(stdout io.Writer) *cobra.Command {
	var project string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "Show each remembered answer: what it matches, its scope, and where it came from",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			store, err := rememberedStore()
			if err != nil {
				return err
			}
			entries, err := store.Load()
			if err != nil {
				return userError(1, err.Error(), "the file is left as it is; fix or remove it by hand")
			}
			if project != "" {
				abs, err := filepath.Abs(project)
				if err != nil {
					return userError(1, err.Error())
				}
				kept := entries[:0]
				for _, e := range entries {
					if e.Scope == "user" || filepath.Clean(e.Project) == abs {
						kept = append(kept, e)
					}
				}
				entries = kept
			}
			if asJSON {
				if entries == nil {
					entries = []rules.Entry{}
				}
				return json.NewEncoder(stdout).Encode(entries)
			}
			tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tDECISION\tMATCHES\tSCOPE\tLEARNED\tAGENT\tFROM")
			for _, e := range entries {
				scope := e.Scope
				if e.Scope == "project" {
					scope += " " + e.Project
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%q\n", e.ID, e.Decision, e.Matches(), scope, e.LearnedAt, e.Agent, e.Request)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVar(&project, "project", "", "only the answers that apply in this project directory")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the entries as JSON")
	return cmd
}

func newRememberedRevokeCmd(stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "revoke ID...",
		Short: "Forget remembered answers by id",
		Args:  cobra.MinimumNArgs(1),
		// The ids in the store, each with what it decides and matches,
		// but not the ones already given.
		ValidArgsFunction: func(cmd *cobra.Command, given []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
			store, err := rememberedStore()
			if err != nil {
				return nil, cobra.ShellCompDirectiveError
			}
			entries, err := store.Load()
			if err != nil {
				return nil, cobra.ShellCompDirectiveError
			}
			var ids []cobra.Completion
			for _, e := range entries {
				if strings.HasPrefix(e.ID, toComplete) && !slices.Contains(given, e.ID) && completable(e.ID) {
					ids = append(ids, cobra.CompletionWithDesc(e.ID, printable(string(e.Decision)+" "+e.Matches())))
				}
			}
			return ids, cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(cmd *cobra.Command, ids []string) error {
			store, err := rememberedStore()
			if err != nil {
				return err
			}
			n, err := store.Revoke(ids...)
			if err != nil {
				return userError(1, err.Error())
			}
			if n != len(ids) {
				return userError(1, fmt.Sprintf("revoked %d of %d: no entry with some of those ids", n, len(ids)), "see 'acp-broker remembered list'")
			}
			fmt.Fprintf(stdout, "revoked %d\n", n)
			return nil
		},
	}
}

func newRememberedClearCmd(stdout io.Writer) *cobra.Command {
	var project string
	cmd := &cobra.Command{
		Use:   "clear",
		Short: "Forget every remembered answer, or a project's",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			store, err := rememberedStore()
			if err != nil {
				return err
			}
			if project != "" {
				if project, err = filepath.Abs(project); err != nil {
					return userError(1, err.Error())
				}
			}
			n, err := store.Clear(project)
			if err != nil {
				return userError(1, err.Error())
			}
			fmt.Fprintf(stdout, "cleared %d\n", n)
			return nil
		},
	}
	cmd.Flags().StringVar(&project, "project", "", "only this project's answers")
	return cmd
}

// completable reports whether a word can be offered to the shell as a
// completion: the shells read one candidate a line, and its description
// after a tab, so a server or tool name (which an MCP server chooses) with
// a control character in it could forge candidates, and one with a
// bidirectional override would not read as what it is; neither is offered.
func completable(word string) bool {
	return word != "" && !strings.ContainsFunc(word, notify.Hidden)
}
