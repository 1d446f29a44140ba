package main

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

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
			return nil, nil, userError(1, fmt.Sprintf("%s:%d: %s: %v", c.File, c.Line, c, err))
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
		Short: "List the requests your running brokers are waiting on a human for",
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
			return tw.Flush()
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

func newAnswerCmd(stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:       "answer ID allow|always|reject",
		Short:     "Answer a pending request from here (see acp-broker pending)",
		Args:      cobra.ExactArgs(2),
		ValidArgs: []string{"allow", "always", "reject"},
		RunE: func(cmd *cobra.Command, args []string) error {
			switch args[1] {
			case "allow", "always", "reject":
			default:
				return userError(2, fmt.Sprintf("unknown answer %q", args[1]), "answer allow, always or reject")
			}
			dir, err := notify.LocalDir()
			if err != nil {
				return userError(1, err.Error())
			}
			p, err := notify.AnswerPending(dir, args[0], args[1])
			if err != nil {
				return userError(1, err.Error(), "see 'acp-broker pending'")
			}
			fmt.Fprintf(stdout, "answered %s (%s): %s\n", printable(p.ID), printable(p.Agent), args[1])
			return nil
		},
	}
}
