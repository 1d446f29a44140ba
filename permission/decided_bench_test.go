//go:build linux

package permission

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/acp-broker/acp-broker/rules"
	"github.com/acp-broker/acp-broker/session"
)

// benchAgentEnv makes the test binary the agent of BenchmarkDecidedTurn
// (see TestMain).
const benchAgentEnv = "ACPB_PERMISSION_BENCH_AGENT"

// benchRules allows the command the bench agent asks about.
const benchRules = `[[rule]]
id = "git-read"
decision = "allow"
command = ["git status", "git log *", "git diff *"]
`

// BenchmarkDecidedTurn measures, in process, the broker's whole live path
// for a permission request the rules decide: one prompt turn in which the
// agent asks to run `git status`, a rule allows it and the broker answers
// the agent itself. "forwarded" asks to run `make build`, which no rule
// decides: the editor is asked and answers at once. "relay" is the same
// turn without the request, so the difference is what the decision costs.
// cpu-ns/op is the CPU time of this process (the broker and the editor's
// side), not the agent's.
func BenchmarkDecidedTurn(b *testing.B) {
	for _, c := range []struct{ name, command string }{{"relay", ""}, {"decided", "git status"}, {"forwarded", "make build"}} {
		b.Run(c.name, func(b *testing.B) { benchTurn(b, c.command) })
	}
}

// benchTurn plays the editor of prompt turns in which the agent asks
// permission to run command ("" for none), answering what is forwarded.
func benchTurn(b *testing.B, command string) {
	f := newBenchFiles(b)
	dir, cwd, loc, log, src, audit := f.dir, f.cwd, f.loc, f.log, f.src, f.audit
	src.AuditTo(audit, "bench")
	engine := &Engine{Rules: src, Audit: audit, Log: log, Agent: "bench", Home: loc.Home, StateDir: loc.StateDir}

	editorIn, toBroker := io.Pipe()
	fromBroker, editorOut := io.Pipe()
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	os.Setenv(benchAgentEnv, "1")
	defer os.Unsetenv(benchAgentEnv)
	done := make(chan error, 1)
	go func() {
		_, err := session.Run(context.Background(), session.Options{
			AgentPath: exe, AgentArgs: []string{exe}, EditorIn: editorIn, EditorOut: editorOut,
			Stderr: os.Stderr, Logger: log, Policy: engine, Started: engine.Started, Modes: engine,
		})
		editorOut.Close()
		done <- err
	}()
	r := bufio.NewReader(fromBroker)
	call := func(line string) []byte {
		if _, err := io.WriteString(toBroker, line+"\n"); err != nil {
			b.Fatal(err)
		}
		for {
			reply, err := r.ReadBytes('\n')
			if err != nil {
				b.Fatal(err)
			}
			switch {
			case bytes.Contains(reply, []byte(`"sessionUpdate":"tool_call`)):
			case bytes.Contains(reply, []byte(`"method":"session/request_permission"`)):
				var m struct{ ID json.RawMessage }
				if err := json.Unmarshal(reply, &m); err != nil {
					b.Fatal(err)
				}
				if _, err := fmt.Fprintf(toBroker, `{"jsonrpc":"2.0","id":%s,"result":{"outcome":{"outcome":"selected","optionId":"allow"}}}`+"\n", m.ID); err != nil {
					b.Fatal(err)
				}
			default:
				return reply
			}
		}
	}
	call(`{"jsonrpc":"2.0","id":"i","method":"initialize","params":{"protocolVersion":1}}`)
	cwdJSON, _ := json.Marshal(cwd)
	call(`{"jsonrpc":"2.0","id":"n","method":"session/new","params":{"cwd":` + string(cwdJSON) + `,"mcpServers":[]}}`)
	commandJSON, _ := json.Marshal(command)
	prompt := `{"jsonrpc":"2.0","id":"p","method":"session/prompt","params":{"sessionId":"s1","prompt":[],"_meta":{"command":` + string(commandJSON) + `}}}`
	want := []byte(`{"jsonrpc":"2.0","id":"p","result":{"stopReason":"end_turn"}}` + "\n")
	var before, after syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &before)
	for b.Loop() {
		if got := call(prompt); !bytes.Equal(got, want) {
			audit, _ := os.ReadFile(filepath.Join(dir, "audit.jsonl"))
			b.Fatalf("the prompt's answer is %q, want %q; the audit log:\n%s", got, want, audit)
		}
	}
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &after)
	cpu := time.Duration(after.Utime.Nano() + after.Stime.Nano() - before.Utime.Nano() - before.Stime.Nano())
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
	toBroker.Close()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	_ = engine.Close(time.Second)
}

// BenchmarkDecide measures, without the relay, what the broker does for a
// permission request the rules allow, in one goroutine (so that callgrind
// counts the same instructions every run): the policy for the session's
// directory, Evaluate on the params and the merged tool call, and the
// audit line.
func BenchmarkDecide(b *testing.B) {
	f := newBenchFiles(b)
	cwd, loc, src, audit := f.cwd, f.loc, f.src, f.audit
	defer audit.Close()
	params := json.RawMessage(`{"sessionId":"s1","toolCall":{"toolCallId":"t1"},"options":[{"optionId":"allow_always","name":"Always Allow","kind":"allow_always"},{"optionId":"allow","name":"Allow","kind":"allow_once"},{"optionId":"reject","name":"Reject","kind":"reject_once"}]}`)
	toolCall := &session.ToolCall{ID: "t1", Fields: map[string]json.RawMessage{
		"toolCallId": json.RawMessage(`"t1"`), "title": json.RawMessage(`"git status"`), "kind": json.RawMessage(`"execute"`),
		"status": json.RawMessage(`"pending"`), "rawInput": json.RawMessage(`{"command":"git status"}`)}}
	info := session.Info{ID: "s1", Cwd: cwd, Opened: true}
	b.ReportAllocs()
	for b.Loop() {
		p, err := src.Policy(info.Cwd)
		if err != nil {
			b.Fatal(err)
		}
		ev := Evaluate(Inputs{Params: params, ToolCall: toolCall, Session: info, Policy: p, Mode: EffectiveMode("", p), Home: loc.Home})
		if ev.Decision != rules.Allow {
			b.Fatalf("decided %s (%s), want allow", ev.Decision, ev.Reason)
		}
		rec := Record{Time: time.Now().UTC(), Session: info.ID, Agent: "bench", Method: "session/request_permission", Option: ev.Option.OptionID, OptionKd: ev.Option.Kind}
		describe(&rec, ev.Request)
		fillVerdict(&rec, ev.Verdict)
		if err := audit.Write(rec); err != nil {
			b.Fatal(err)
		}
	}
}

func TestMain(m *testing.M) {
	if os.Getenv(benchAgentEnv) != "" {
		if err := benchAgent(os.Stdin, os.Stdout); err != nil && err != io.EOF {
			fmt.Fprintln(os.Stderr, "bench agent:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// benchAgent plays the agent of BenchmarkDecidedTurn: it answers
// initialize and session/new, and a prompt with a _meta.command announces a
// tool call running it, asks permission, waits for the answer and reports
// the tool call completed before answering the prompt.
func benchAgent(in io.Reader, out io.Writer) error {
	r := bufio.NewReader(in)
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			Meta struct {
				Command string `json:"command"`
			} `json:"_meta"`
		} `json:"params"`
	}
	respond := func(id json.RawMessage, result string) error {
		_, err := fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"result":%s}`+"\n", id, result)
		return err
	}
	const update = `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"tool_call","toolCallId":"t%d","title":%s,"kind":"execute","status":"pending","rawInput":{"command":%s}}}}` + "\n"
	const request = `{"jsonrpc":"2.0","id":%d,"method":"session/request_permission","params":{"sessionId":"s1","toolCall":{"toolCallId":"t%d"},"options":[{"optionId":"allow_always","name":"Always Allow","kind":"allow_always"},{"optionId":"allow","name":"Allow","kind":"allow_once"},{"optionId":"reject","name":"Reject","kind":"reject_once"}]}}` + "\n"
	const completed = `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"tool_call_update","toolCallId":"t%d","status":"completed"}}}` + "\n"
	next := 0
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			return err
		}
		m.Params.Meta.Command = ""
		if err := json.Unmarshal(line, &m); err != nil {
			return err
		}
		switch m.Method {
		case "initialize":
			err = respond(m.ID, `{"protocolVersion":1,"agentCapabilities":{}}`)
		case "session/new":
			err = respond(m.ID, `{"sessionId":"s1"}`)
		case "session/prompt":
			if command := m.Params.Meta.Command; command != "" {
				next++
				title, _ := json.Marshal(command)
				if _, err := fmt.Fprintf(out, update+request, next, title, title, next, next); err != nil {
					return err
				}
				answer, err := r.ReadBytes('\n')
				if err != nil {
					return err
				}
				if want := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{"outcome":{"outcome":"selected","optionId":"allow"}}}`+"\n", next); string(answer) != want {
					return fmt.Errorf("the answer is %q, want %q", answer, want)
				}
				if _, err := fmt.Fprintf(out, completed, next); err != nil {
					return err
				}
			}
			err = respond(m.ID, `{"stopReason":"end_turn"}`)
		}
		if err != nil {
			return err
		}
	}
}

// benchFiles are a broker's files for the benchmarks: its rules (benchRules),
// state and audit log in one directory, and a project directory apart from
// it, since the broker's own files are protected paths, as a user's are.
type benchFiles struct {
	dir, cwd string
	loc      rules.Locations
	log      *slog.Logger
	src      *RuleSource
	audit    *Audit
}

func newBenchFiles(b *testing.B) benchFiles {
	root := b.TempDir()
	f := benchFiles{dir: filepath.Join(root, "broker"), cwd: filepath.Join(root, "project")}
	for _, d := range []string{f.dir, f.cwd} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			b.Fatal(err)
		}
	}
	config := filepath.Join(f.dir, "rules.toml")
	if err := os.WriteFile(config, []byte(benchRules), 0o600); err != nil {
		b.Fatal(err)
	}
	f.loc = rules.Locations{User: filepath.Join(f.dir, "config.toml"), StateDir: filepath.Join(f.dir, "state"), Home: filepath.Join(f.dir, "home")}
	f.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	var err error
	if f.src, _, err = NewRuleSource(rules.LoadOptions{Locations: f.loc, Extra: []string{config}}, f.dir, f.log); err != nil {
		b.Fatal(err)
	}
	if f.audit, err = OpenAudit(filepath.Join(f.dir, "audit.jsonl")); err != nil {
		b.Fatal(err)
	}
	return f
}
