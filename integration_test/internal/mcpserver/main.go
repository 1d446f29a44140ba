// Command mcpserver is a small MCP stdio server used by the integration tests
// as a real upstream behind the broker's MCP proxy.
//
// It exposes a handful of "notes" tools whose annotations cover the cases the
// tests care about (read-only, contradictory, explicitly non-destructive,
// absent), a tool that changes another tool's annotations at run time so the
// SDK emits notifications/tools/list_changed, and a tool that reports the
// arguments and environment the server was started with.
//
// Environment:
//
//	MCPSERVER_LOG     if set, every tool call appends
//	                  "<tool> <arguments as compact JSON>\n" to this file
//	                  before doing anything else, so tests can prove that a
//	                  denied call never reached the server.
//	MCPSERVER_STDERR  if set, "mcpserver started" is written to stderr at start.
//	MCPSERVER_STDIN_LOG if set, every byte read from stdin is appended to
//	                  this file.
//
// All outputs are deterministic. The server exits with status 0 when stdin
// reaches EOF.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type readNoteArgs struct {
	Name string `json:"name" jsonschema:"name of the note to read"`
}

type searchNotesArgs struct {
	Query string `json:"query" jsonschema:"text to search for"`
}

type writeNoteArgs struct {
	Name string `json:"name" jsonschema:"name of the note to write"`
	Text string `json:"text" jsonschema:"new contents of the note"`
}

type noArgs struct{}

// callLog appends one line per tool call to the file named by MCPSERVER_LOG.
type callLog struct {
	mu   sync.Mutex
	path string
}

func (l *callLog) record(tool string, args json.RawMessage) error {
	if l.path == "" {
		return nil
	}
	var buf bytes.Buffer
	buf.WriteString(tool)
	buf.WriteByte(' ')
	if len(bytes.TrimSpace(args)) == 0 {
		buf.WriteString("{}")
	} else if err := json.Compact(&buf, args); err != nil {
		return fmt.Errorf("compacting arguments of %s: %w", tool, err)
	}
	buf.WriteByte('\n')

	l.mu.Lock()
	defer l.mu.Unlock()
	f, err := os.OpenFile(l.path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(buf.Bytes()); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

// logged wraps a typed tool handler so that the call is recorded before the
// handler itself runs.
func logged[In any](log *callLog, name string, h func(context.Context, In) (*mcp.CallToolResult, error)) mcp.ToolHandlerFor[In, any] {
	return func(ctx context.Context, req *mcp.CallToolRequest, in In) (*mcp.CallToolResult, any, error) {
		if err := log.record(name, req.Params.Arguments); err != nil {
			return nil, nil, err
		}
		res, err := h(ctx, in)
		return res, nil, err
	}
}

func boolPtr(b bool) *bool { return &b }

func main() {
	if os.Getenv("MCPSERVER_STDERR") != "" {
		fmt.Fprintln(os.Stderr, "mcpserver started")
	}
	log := &callLog{path: os.Getenv("MCPSERVER_LOG")}

	server := mcp.NewServer(&mcp.Implementation{Name: "notes", Version: "1.0.0"}, nil)

	readNote := logged(log, "read_note", func(_ context.Context, in readNoteArgs) (*mcp.CallToolResult, error) {
		return text("note " + in.Name + ": hello"), nil
	})
	mcp.AddTool(server, &mcp.Tool{
		Name:        "read_note",
		Description: "Read a note by name.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, readNote)

	mcp.AddTool(server, &mcp.Tool{
		Name:        "search_notes",
		Description: "Search notes for a query.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, DestructiveHint: boolPtr(true)},
	}, logged(log, "search_notes", func(_ context.Context, in searchNotesArgs) (*mcp.CallToolResult, error) {
		return text("search " + in.Query + ": no matches"), nil
	}))

	mcp.AddTool(server, &mcp.Tool{
		Name:        "write_note",
		Description: "Write a note.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: false, DestructiveHint: boolPtr(false)},
	}, logged(log, "write_note", func(_ context.Context, in writeNoteArgs) (*mcp.CallToolResult, error) {
		return text("wrote note " + in.Name), nil
	}))

	mcp.AddTool(server, &mcp.Tool{
		Name:        "delete_notes",
		Description: "Delete all notes.",
	}, logged(log, "delete_notes", func(context.Context, noArgs) (*mcp.CallToolResult, error) {
		return text("deleted all notes"), nil
	}))

	mcp.AddTool(server, &mcp.Tool{
		Name:        "upgrade",
		Description: "Change read_note into a destructive tool.",
	}, logged(log, "upgrade", func(context.Context, noArgs) (*mcp.CallToolResult, error) {
		// Replacing a tool makes the SDK send notifications/tools/list_changed.
		mcp.AddTool(server, &mcp.Tool{
			Name:        "read_note",
			Description: "Read a note by name, then erase it.",
			Annotations: &mcp.ToolAnnotations{ReadOnlyHint: false, DestructiveHint: boolPtr(true)},
		}, readNote)
		return text("upgraded"), nil
	}))

	mcp.AddTool(server, &mcp.Tool{
		Name:        "env",
		Description: "Report the server's command-line arguments and environment.",
	}, logged(log, "env", func(context.Context, noArgs) (*mcp.CallToolResult, error) {
		env := os.Environ()
		sort.Strings(env)
		args := os.Args[1:]
		if args == nil {
			args = []string{}
		}
		b, err := json.Marshal(struct {
			Args []string `json:"args"`
			Env  []string `json:"env"`
		}{args, env})
		if err != nil {
			return nil, err
		}
		return text(string(b)), nil
	}))

	var transport mcp.Transport = &mcp.StdioTransport{}
	if path := os.Getenv("MCPSERVER_STDIN_LOG"); path != "" {
		// Every byte the server reads is copied to the file, so a test can
		// compare what reached the server with and without the proxy.
		f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			fmt.Fprintf(os.Stderr, "mcpserver: %v\n", err)
			os.Exit(1)
		}
		transport = &mcp.IOTransport{Reader: teeCloser{io.TeeReader(os.Stdin, f), os.Stdin}, Writer: os.Stdout}
	}
	if err := server.Run(context.Background(), transport); err != nil {
		fmt.Fprintf(os.Stderr, "mcpserver: %v\n", err)
		os.Exit(1)
	}
}

// teeCloser reads through a tee and closes the stream under it.
type teeCloser struct {
	io.Reader
	io.Closer
}
