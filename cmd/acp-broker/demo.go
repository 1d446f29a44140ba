package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/acp-broker/acp-broker/internal/demo"
)

// demoLong is demo's help text. The requests it says go to the editor are
// the demo's script's, which every run is checked against.
func demoLong() string {
	asked := demo.EditorAsked()
	return fmt.Sprintf(`demo shows what acp-broker does, with no agent or API key: a scripted
editor talks to a built-in example agent through a real acp-broker process
that has a small rule file of the demo's own. Every message the broker
handles is printed, each way, as a readable transcript: the requests it
allowed or denied itself, with the rule or remembered answer and its
reason, and the %s it passed to the editor:

    %s

Your own rules, trust data and audit log play no part. The example agent
runs no commands; its file requests are answered in a temporary directory
that is removed at the end, with the broker's rule file, audit log and
trace.

On a terminal, the lines are fitted to its width and the decisions coloured
(unless NO_COLOR is set or TERM is dumb); otherwise nothing is cut or
coloured.`,
		demo.NumberWord(len(asked))+" requests", strings.Join(asked, "\n    "))
}

// demoStyle returns how the demo shows its output on stdout: fitted to the
// width of the terminal stdout is, coloured unless NO_COLOR is set to
// anything (https://no-color.org) or TERM is "dumb" (a terminal that claims
// no capabilities, escapes included), and neither when stdout is not a
// terminal.
func demoStyle(stdout io.Writer, getenv func(string) string) (width int, colour bool) {
	f, ok := stdout.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return 0, false
	}
	if w, _, err := term.GetSize(int(f.Fd())); err == nil && w > 0 {
		width = w
	}
	return width, getenv("NO_COLOR") == "" && getenv("TERM") != "dumb"
}

func newDemoCmd(stdout, stderr io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "demo",
		Short: "Watch the broker relay and decide a built-in example conversation",
		Long:  demoLong(),
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			self, err := demo.Self()
			if err != nil {
				return userError(1, err.Error())
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			// A reader that goes away (acp-broker demo | head) must not kill
			// the demo before it has stopped the broker and removed its
			// workspace: catching SIGPIPE turns the write into an EPIPE error.
			sigpipe := make(chan os.Signal, 1)
			signal.Notify(sigpipe, syscall.SIGPIPE)
			defer signal.Stop(sigpipe)

			width, colour := demoStyle(stdout, os.Getenv)
			_, err = demo.Run(ctx, demo.Options{Self: self, Stdout: stdout, Stderr: stderr, Width: width, Colour: colour})
			switch {
			case ctx.Err() != nil && cmd.Context().Err() == nil:
				return statusError(130) // interrupted: the user knows why
			case errors.Is(err, syscall.EPIPE):
				return statusError(141) // as a shell reports a SIGPIPE death
			case err != nil:
				return userError(1, "demo: "+err.Error(),
					"this is a bug in acp-broker; please report it with the output above")
			}
			return nil
		},
	}
}

func newExampleAgentCmd(stdin io.Reader, stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:    "example-agent",
		Short:  "Run the demo's scripted example agent on stdin and stdout",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := demo.RunAgent(cmd.Context(), stdin, stdout, cmd.ErrOrStderr()); err != nil {
				return userError(1, "example-agent: "+err.Error())
			}
			return nil
		},
	}
}
