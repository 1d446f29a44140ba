package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/acp-broker/acp-broker/elicit"
	"github.com/acp-broker/acp-broker/notify"
	"github.com/acp-broker/acp-broker/permission"
	"github.com/acp-broker/acp-broker/rules"
)

// newAsker builds the routing and the channels the config describes, and
// the local channel for `acp-broker pending` and `answer`. A channel whose
// secret is missing stops the broker: it would otherwise ask nobody where
// the user expects to be asked. It returns what to close at exit.
func newAsker(policy *rules.Policy, logger *slog.Logger) (*permission.Asker, func(), error) {
	cfg, configs := policy.AskSettings()
	a := &permission.Asker{Route: cfg.Route, EscalateAfter: cfg.EscalateAfter, Timeout: cfg.Timeout, Tell: cfg.Tell}
	var closers []func()
	closeAll := func() {
		for _, c := range closers {
			c()
		}
	}
	for _, c := range configs {
		ch, closeCh, err := newChannel(c)
		if err != nil {
			closeAll()
			return nil, nil, userError(1, fmt.Sprintf("%s: %s: %v", c.Where(), c, err))
		}
		if closeCh != nil {
			closers = append(closers, closeCh)
		}
		a.Channels = append(a.Channels, permission.Channel{Channel: ch, Timeout: c.Timeout})
	}
	if (cfg.Route == "channels" || cfg.EscalateAfter > 0) && len(a.Channels) == 0 && cfg.Route != "editor" {
		closeAll()
		return nil, nil, userError(1, fmt.Sprintf("[ask] route = %q, but no [[channel]] is configured", cfg.Route),
			`add a [[channel]] table, or route = "editor"`)
	}
	if dir, err := notify.LocalDir(); err != nil {
		logger.Warn("acp-broker answer will not reach this broker", "err", err)
	} else if local, err := notify.ListenLocal(dir); err != nil {
		logger.Warn("acp-broker answer will not reach this broker", "err", err)
	} else {
		a.Local = local
		closers = append(closers, func() { local.Close() })
	}
	return a, closeAll, nil
}

func newChannel(c rules.ChannelConfig) (notify.Channel, func(), error) {
	switch c.Type {
	case "exec":
		return &notify.Exec{ChannelName: c.Name, Command: c.Command}, nil, nil
	case "ntfy":
		token := ""
		if c.TokenEnv != "" {
			if token = os.Getenv(c.TokenEnv); token == "" {
				return nil, nil, fmt.Errorf("the environment variable %s (token_env) is not set", c.TokenEnv)
			}
		}
		// The buttons' answers are signed with a key only this broker knows.
		secret := make([]byte, 32)
		if _, err := rand.Read(secret); err != nil {
			return nil, nil, err
		}
		return &notify.Ntfy{ChannelName: c.Name, Server: c.Server, Topic: c.Topic, ReplyTopic: c.ReplyTopic, Token: token, Secret: secret}, nil, nil
	case "webhook":
		secret := os.Getenv(c.SecretEnv)
		if secret == "" {
			return nil, nil, fmt.Errorf("the environment variable %s (secret_env) is not set", c.SecretEnv)
		}
		w := &notify.Webhook{ChannelName: c.Name, URL: c.URL, Secret: []byte(secret), Listen: c.Listen, PublicURL: c.PublicURL}
		if err := w.Start(); err != nil {
			return nil, nil, err
		}
		return w, func() { w.Close() }, nil
	}
	return nil, nil, fmt.Errorf("unknown channel type %q", c.Type)
}

func newPendingCmd(stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "pending",
		Short: "List the requests and questions your running brokers are waiting on a human for",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dir, err := notify.LocalDir()
			if err != nil {
				return userError(1, err.Error())
			}
			pending, err := notify.ListPending(dir)
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				return userError(1, err.Error())
			}
			tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tAGENT\tKIND\tASKS\tOPTIONS")
			for _, p := range pending {
				if p.IsQuestion() {
					continue
				}
				var opts []string
				for _, o := range p.Options {
					if o.Remembers != "" && o.Kind == "allow_always" {
						// What `answer ID always` makes the broker remember.
						opts = append(opts, o.Kind+" (remembers: "+o.Remembers+")")
						continue
					}
					opts = append(opts, o.Kind)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", printable(p.ID), printable(p.Agent), printable(p.Kind),
					printable(strings.ReplaceAll(p.Summary(120), "\n", "; ")), printable(strings.Join(opts, ",")))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			describeQuestions(stdout, pending)
			return nil
		},
	}
}

// printable replaces control characters in text that came from the agent,
// so a hostile title cannot drive the terminal it is printed on.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		if notify.Hidden(r) {
			return '?'
		}
		return r
	}, s)
}

// answerOptions are the command line of `acp-broker answer` for a question.
type answerOptions struct {
	fields                  []string // NAME=VALUE, as typed
	accept, decline, cancel bool
}

func newAnswerCmd(stdout io.Writer) *cobra.Command {
	var opts answerOptions
	cmd := &cobra.Command{
		Use:   "answer ID allow|always|reject\n  acp-broker answer ID [--field NAME=VALUE ...] [--accept | --decline | --cancel]",
		Short: "Answer a pending request or question from here (see acp-broker pending)",
		Long: `Answer a pending request or question from here (see acp-broker pending).

A permission request is answered allow, always or reject. A question is
answered with its fields (--field NAME=VALUE, once per field, and once per
value of a multi-select), --decline or --cancel; a URL question with
--accept (you consent to open the URL yourself: the broker never opens it),
--decline or --cancel. Given none of these, a question is asked field by
field: with a form on a terminal, else one prompt a line on stderr, read
from stdin a line at a time. An answer that does not fit the form is
refused, and the question stays open.`,
		Args:              cobra.RangeArgs(1, 2),
		ValidArgsFunction: completeAnswer,
		RunE: func(cmd *cobra.Command, args []string) error {
			dir, err := notify.LocalDir()
			if err != nil {
				return userError(1, err.Error())
			}
			if len(args) == 2 {
				return answerPermission(stdout, dir, args, opts)
			}
			return answerQuestion(cmd.Context(), stdout, cmd.InOrStdin(), cmd.ErrOrStderr(), dir, args[0], opts)
		},
	}
	cmd.Flags().StringArrayVar(&opts.fields, "field", nil, "a field's answer, `NAME=VALUE` (repeat it for each field, and for each value of a multi-select)")
	cmd.Flags().BoolVar(&opts.accept, "accept", false, "accept the question: a URL question's consent, or a form with its --field values")
	cmd.Flags().BoolVar(&opts.decline, "decline", false, "decline the question")
	cmd.Flags().BoolVar(&opts.cancel, "cancel", false, "cancel the question")
	cmd.MarkFlagsMutuallyExclusive("accept", "decline", "cancel")
	cmd.MarkFlagsMutuallyExclusive("field", "decline")
	cmd.MarkFlagsMutuallyExclusive("field", "cancel")
	_ = cmd.RegisterFlagCompletionFunc("field", completeField)
	return cmd
}

// answerPermission answers a permission request allow, always or reject.
func answerPermission(stdout io.Writer, dir string, args []string, opts answerOptions) error {
	if len(opts.fields) > 0 || opts.accept || opts.decline || opts.cancel {
		return userError(2, "--field, --accept, --decline and --cancel answer a question, not allow, always or reject",
			"answer a permission request: acp-broker answer ID allow|always|reject")
	}
	switch args[1] {
	case "allow", "always", "reject":
	default:
		return userError(2, fmt.Sprintf("unknown answer %q", args[1]), "answer allow, always or reject")
	}
	p, err := notify.AnswerPending(dir, args[0], args[1])
	if err != nil {
		if p.IsQuestion() {
			return userError(1, err.Error(), fmt.Sprintf("answer it: acp-broker answer %s --field NAME=VALUE ... (or --decline, --cancel)", printable(p.ID)))
		}
		return userError(1, err.Error(), "see 'acp-broker pending'")
	}
	fmt.Fprintf(stdout, "answered %s (%s): %s\n", printable(p.ID), printable(p.Agent), args[1])
	return nil
}

// answerQuestion answers the question id: from the flags if they say the
// answer, else by asking each field, on a terminal with a form and
// otherwise with plain prompts on stderr read from stdin.
func answerQuestion(ctx context.Context, stdout io.Writer, stdin io.Reader, stderr io.Writer, dir, id string, opts answerOptions) error {
	q, err := notify.FindPending(dir, id)
	if err != nil {
		return userError(1, err.Error(), "see 'acp-broker pending'")
	}
	if !q.IsQuestion() {
		return userError(2, fmt.Sprintf("request %s is a permission request, not a question", printable(q.ID)),
			fmt.Sprintf("answer it: acp-broker answer %s allow|always|reject", printable(q.ID)))
	}
	if q.Mode == "url" && len(opts.fields) > 0 {
		return userError(2, fmt.Sprintf("question %s asks you to open a URL: it has no fields", printable(q.ID)),
			"answer it with --accept, --decline or --cancel")
	}
	// Read once: for the form, the plain prompts and the content.
	form, formErr := questionForm(q)
	if formErr != nil && !opts.decline && !opts.cancel {
		return userError(1, fmt.Sprintf("question %s cannot be answered here: %v", printable(q.ID), formErr))
	}
	ans := questionAnswer{values: map[string][]string{}}
	switch {
	case opts.decline:
		ans.action = "decline"
	case opts.cancel:
		ans.action = "cancel"
	case opts.accept || len(opts.fields) > 0:
		ans.action = "accept"
		for _, f := range opts.fields {
			name, value, ok := strings.Cut(f, "=")
			if !ok || name == "" {
				return userError(2, fmt.Sprintf("--field %q is not NAME=VALUE", f))
			}
			ans.values[name] = append(ans.values[name], value)
		}
	case isTerminal(stdin) && isTerminal(stderr) && os.Getenv("TERM") != "dumb":
		// The form reads keys from one and draws on the other. (On a dumb
		// terminal huh would fall back to its accessible mode, which reads
		// an ended input as the default answer: the plain prompts do not.)
		ans, err = askTerminal(ctx, stdin, stderr, q, form)
	default:
		ans, err = askPlain(bufio.NewReader(stdin), stderr, q, form)
	}
	if err != nil {
		return userError(1, err.Error(), "nothing was sent: the question is still open")
	}
	var content json.RawMessage
	if ans.action == "accept" && q.Mode != "url" {
		if content, err = form.Content(ans.values); err != nil {
			return userError(1, fmt.Sprintf("the answer does not fit question %s: %v", printable(q.ID), err),
				"nothing was sent: the question is still open (see 'acp-broker pending')")
		}
	}
	if err := notify.AnswerQuestion(dir, q, ans.action, content); err != nil {
		return userError(1, err.Error(), "see 'acp-broker pending'")
	}
	fmt.Fprintf(stdout, "answered %s (%s): %s\n", printable(q.ID), printable(q.Agent), ans.action)
	if q.Mode == "url" && ans.action == "accept" {
		fmt.Fprintf(stdout, "open it yourself (host %s): %s\n", notify.OneLine(q.URLHost()), notify.OneLine(q.URL))
	}
	return nil
}

// completeAnswer completes `acp-broker answer`: the pending ids first,
// then the answers the request takes (its offered decisions, or a
// question's fields and actions).
func completeAnswer(_ *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
	dir, err := notify.LocalDir()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	if len(args) == 0 {
		pending, _ := notify.ListPending(dir)
		var out []cobra.Completion
		for _, p := range pending {
			what := strings.ReplaceAll(p.Summary(60), "\n", "; ")
			if p.IsQuestion() {
				what = "question: " + notify.Truncate(notify.OneLine(p.Message), 60)
			}
			out = append(out, cobra.CompletionWithDesc(printable(p.ID), printable(p.Agent)+": "+printable(what)))
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
	if len(args) > 1 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	p, err := notify.FindPending(dir, args[0])
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	if !p.IsQuestion() {
		var out []cobra.Completion
		for _, word := range []string{"allow", "always", "reject"} {
			if _, err := notify.DecisionOption(p.Prompt, word); err == nil {
				out = append(out, word)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
	out := []cobra.Completion{"--decline", "--cancel"}
	if p.Mode == "url" {
		return append([]cobra.Completion{"--accept"}, out...), cobra.ShellCompDirectiveNoFileComp
	}
	form, err := elicit.ParseSchema(p.RequestedSchema)
	if err != nil {
		return out, cobra.ShellCompDirectiveNoFileComp
	}
	var fields []cobra.Completion
	for _, f := range form.Fields {
		fields = append(fields, "--field="+printable(f.Name)+"=")
	}
	return append(fields, out...), cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
}

// completeField completes --field's NAME=VALUE: the question's field
// names, then a choice field's values, or yes and no.
func completeField(_ *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	none := cobra.ShellCompDirectiveNoFileComp
	dir, err := notify.LocalDir()
	if err != nil || len(args) != 1 {
		return nil, none
	}
	q, err := notify.FindPending(dir, args[0])
	if err != nil || q.Mode != "form" {
		return nil, none
	}
	form, err := elicit.ParseSchema(q.RequestedSchema)
	if err != nil {
		return nil, none
	}
	var out []cobra.Completion
	name, _, typed := strings.Cut(toComplete, "=")
	for _, f := range form.Fields {
		switch {
		case !typed:
			out = append(out, cobra.CompletionWithDesc(printable(f.Name)+"=", fieldSummary(f)))
		case f.Name == name && f.Type == "boolean":
			out = append(out, cobra.Completion(printable(f.Name)+"=yes"), cobra.Completion(printable(f.Name)+"=no"))
		case f.Name == name:
			for _, c := range f.Choices {
				out = append(out, cobra.CompletionWithDesc(printable(f.Name)+"="+printable(c.Value), printable(c.Title)))
			}
		}
	}
	if !typed {
		return out, none | cobra.ShellCompDirectiveNoSpace
	}
	return out, none
}
