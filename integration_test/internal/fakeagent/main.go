// Command fakeagent is a puppet ACP agent for the integration tests: a real
// subprocess whose every byte on stdout and stderr is chosen by the test.
//
// It connects to the test over a Unix socket (-ctl) and speaks a line
// protocol there, one operation byte followed by a payload and '\n':
//
// test → agent:
//
//	O<line>   write <line>\n to stdout
//	P<bytes>  write <bytes> to stdout, no newline
//	W<line>   write <line>\n to stderr
//	w<bytes>  write <bytes> to stderr, no newline
//	X<code>   exit with <code>
//	K<sig>    kill itself with signal number <sig>
//	G         start two `sleep 300` children, one in its own process group
//	          and one in a new session (setsid); reply G<pid> <pid>
//	D         start a daemon: `sleep 300` in a new session whose parent, a
//	          shell, exits at once (a double fork); reply D<pid>
//	F<tag>    barrier: reply F<tag> once everything before it is written
//	M<json>   start an MCP server as an agent would, from {"addr", "command",
//	          "args", "env"}: its environment is the agent's plus env
//	          ("NAME=value" each), its stderr the agent's, and its stdin and
//	          stdout a connection to the Unix socket addr, where the test
//	          plays the agent's MCP client; reply M<pid>
//	C<json>   run a command as the agent's child, from {"argv", "env"}, with
//	          the agent's environment plus env and no stdio; reply C<status>
//	          once it has exited
//	H         hold: stop reading stdin (what was read already is reported)
//	U         resume reading stdin
//
// agent → test:
//
//	R<json>   ready: signal handlers are installed; pid, pgid, args, cwd, probe env
//	I<line>   a line read from stdin, without its '\n'
//	i<bytes>  a final unterminated piece of stdin
//	E         stdin reached end of file
//	S<sig>    a signal arrived (SIGINT, SIGTERM or SIGHUP)
//	G, F, M   replies as above
//
// With -login it instead plays a terminal login, as an agent run with its
// terminal auth method's arguments does: it prints a line naming its pid,
// arguments and probe env and a prompt on stdout, reads one line from stdin, prints what it
// read and exits with -login-exit.
//
// With -local-answer '{"socket","id","digest","optionId"}' (or, for a
// question, "action" and "content" in place of "optionId") it is instead a
// bare client of a broker's local answer socket, as a hostile agent that
// computed a prompt's digest itself would write: it sends one answer, prints
// the response and exits 0 if the broker took it, else 1.
//
// Stdout is buffered and flushed whenever the control connection has no
// further buffered command, so a batch of O commands sent in one write leaves
// the agent as one burst, as a real agent streaming updates would.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

func main() {
	ctl := flag.String("ctl", "", "control socket address")
	onEOF := flag.String("on-eof", "exit", "what to do when stdin ends: exit (status 0) or ignore")
	onSignal := flag.String("on-signal", "die", "on SIGINT/SIGTERM/SIGHUP: die (by that signal), ignore, or exit:N")
	localAnswer := flag.String("local-answer", "", "answer on a broker's local socket and exit")
	login := flag.Bool("login", false, "play a terminal login and exit")
	loginExit := flag.Int("login-exit", 0, "with -login, the exit status")
	flag.Parse()
	if *login {
		os.Exit(playLogin(*loginExit))
	}
	if *localAnswer != "" {
		os.Exit(answerLocally(*localAnswer))
	}
	if err := run(*ctl, *onEOF, *onSignal); err != nil {
		fmt.Fprintf(os.Stderr, "fakeagent: %v\n", err)
		os.Exit(99)
	}
}

type agent struct {
	ctlMu sync.Mutex
	ctl   net.Conn

	outMu sync.Mutex
	out   *bufio.Writer

	holdMu sync.Mutex
	hold   chan struct{} // while not nil, stdin is not read; closed to resume
}

// heldReader reads stdin, except while the test holds it: then the pipe
// fills and whoever writes to the agent blocks.
type heldReader struct{ a *agent }

func (h heldReader) Read(p []byte) (int, error) {
	h.a.waitHold()
	return os.Stdin.Read(p)
}

// waitHold blocks while the test holds the agent's stdin.
func (a *agent) waitHold() {
	a.holdMu.Lock()
	h := a.hold
	a.holdMu.Unlock()
	if h != nil {
		<-h
	}
}

func (a *agent) report(op byte, payload []byte) {
	buf := make([]byte, 0, len(payload)+2)
	buf = append(buf, op)
	buf = append(buf, payload...)
	buf = append(buf, '\n')
	a.ctlMu.Lock()
	defer a.ctlMu.Unlock()
	_, _ = a.ctl.Write(buf)
}

func (a *agent) flush() {
	a.outMu.Lock()
	defer a.outMu.Unlock()
	_ = a.out.Flush()
}

func run(ctlAddr, onEOF, onSignal string) error {
	if ctlAddr == "" {
		return fmt.Errorf("-ctl is required")
	}
	exitOnSignal := -1
	switch {
	case onSignal == "die", onSignal == "ignore":
	case len(onSignal) > 5 && onSignal[:5] == "exit:":
		n, err := strconv.Atoi(onSignal[5:])
		if err != nil {
			return fmt.Errorf("bad -on-signal %q", onSignal)
		}
		exitOnSignal = n
	default:
		return fmt.Errorf("bad -on-signal %q", onSignal)
	}
	if onEOF != "exit" && onEOF != "ignore" {
		return fmt.Errorf("bad -on-eof %q", onEOF)
	}

	conn, err := net.Dial("unix", ctlAddr)
	if err != nil {
		return err
	}
	a := &agent{ctl: conn, out: bufio.NewWriterSize(os.Stdout, 64<<10)}

	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	go func() {
		for s := range sigs {
			sig := s.(syscall.Signal)
			a.report('S', []byte(strconv.Itoa(int(sig))))
			switch {
			case onSignal == "ignore":
			case exitOnSignal >= 0:
				a.flush()
				os.Exit(exitOnSignal)
			default:
				a.flush()
				signal.Reset(sig)
				_ = syscall.Kill(os.Getpid(), sig)
			}
		}
	}()

	wd, _ := os.Getwd()
	ready, _ := json.Marshal(map[string]any{
		"pid":   os.Getpid(),
		"pgid":  mustPgid(),
		"args":  flag.Args(),
		"cwd":   wd,
		"probe": os.Getenv("FAKEAGENT_PROBE"),
	})
	a.report('R', ready)

	go a.readStdin(onEOF == "exit")
	return a.serve(bufio.NewReaderSize(conn, 64<<10))
}

func mustPgid() int {
	pgid, err := syscall.Getpgid(0)
	if err != nil {
		return -1
	}
	return pgid
}

// readStdin reports every stdin line to the test, byte for byte.
func (a *agent) readStdin(exitAtEOF bool) {
	r := bufio.NewReaderSize(heldReader{a}, 64<<10)
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 && line[len(line)-1] == '\n' {
			a.report('I', line[:len(line)-1])
		} else if len(line) > 0 {
			a.report('i', line)
		}
		if err != nil {
			break
		}
	}
	a.report('E', nil)
	if exitAtEOF {
		a.flush()
		os.Exit(0)
	}
}

// serve executes commands from the test until the control connection closes.
func (a *agent) serve(ctl *bufio.Reader) error {
	for {
		cmd, err := ctl.ReadBytes('\n')
		if err != nil {
			a.flush()
			if err == io.EOF {
				// The test went away; do not outlive it.
				os.Exit(98)
			}
			return err
		}
		op, arg := cmd[0], cmd[1:len(cmd)-1]
		if op != 'O' && op != 'P' {
			a.flush()
		}
		switch op {
		case 'O', 'P':
			a.outMu.Lock()
			_, _ = a.out.Write(arg)
			if op == 'O' {
				_ = a.out.WriteByte('\n')
			}
			if op == 'P' {
				_ = a.out.Flush()
			}
			a.outMu.Unlock()
		case 'W':
			_, _ = os.Stderr.Write(append(arg, '\n'))
		case 'w':
			_, _ = os.Stderr.Write(arg)
		case 'X':
			code, _ := strconv.Atoi(string(arg))
			os.Exit(code)
		case 'K':
			sig, _ := strconv.Atoi(string(arg))
			signal.Reset(syscall.Signal(sig))
			_ = syscall.Kill(os.Getpid(), syscall.Signal(sig))
			select {}
		case 'G':
			same := exec.Command("sleep", "300")
			same.Stderr = os.Stderr
			other := exec.Command("sleep", "300")
			other.Stderr = os.Stderr
			other.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
			if err := same.Start(); err != nil {
				return err
			}
			if err := other.Start(); err != nil {
				return err
			}
			a.report('G', fmt.Appendf(nil, "%d %d", same.Process.Pid, other.Process.Pid))
		case 'D':
			out, err := exec.Command("sh", "-c", "setsid sleep 300 </dev/null >/dev/null 2>&1 & echo $!").Output()
			if err != nil {
				return fmt.Errorf("D: %w", err)
			}
			a.report('D', bytes.TrimSpace(out))
		case 'F':
			a.report('F', arg)
		case 'C':
			var c struct {
				Argv []string `json:"argv"`
				Env  []string `json:"env"`
			}
			if err := json.Unmarshal(arg, &c); err != nil || len(c.Argv) == 0 {
				return fmt.Errorf("C: bad spec %q", arg)
			}
			go func() {
				cmd := exec.Command(c.Argv[0], c.Argv[1:]...)
				cmd.Env = append(os.Environ(), c.Env...)
				status := 0
				if err := cmd.Run(); err != nil {
					status = -1
					if ee, ok := err.(*exec.ExitError); ok {
						status = ee.ExitCode()
					}
				}
				a.report('C', []byte(strconv.Itoa(status)))
			}()
		case 'H':
			a.holdMu.Lock()
			if a.hold == nil {
				a.hold = make(chan struct{})
			}
			a.holdMu.Unlock()
		case 'U':
			a.holdMu.Lock()
			if a.hold != nil {
				close(a.hold)
				a.hold = nil
			}
			a.holdMu.Unlock()
		case 'M':
			pid, err := startMCPServer(arg)
			if err != nil {
				return err
			}
			a.report('M', fmt.Appendf(nil, "%d", pid))
		default:
			return fmt.Errorf("unknown control op %q", op)
		}
		if ctl.Buffered() == 0 {
			a.flush()
		}
	}
}

// startMCPServer starts an MCP server for the M operation.
func startMCPServer(spec []byte) (int, error) {
	var m struct {
		Addr    string   `json:"addr"`
		Command string   `json:"command"`
		Args    []string `json:"args"`
		Env     []string `json:"env"`
	}
	if err := json.Unmarshal(spec, &m); err != nil {
		return 0, fmt.Errorf("M: %w", err)
	}
	conn, err := net.Dial("unix", m.Addr)
	if err != nil {
		return 0, fmt.Errorf("M: %w", err)
	}
	defer conn.Close()
	f, err := conn.(*net.UnixConn).File()
	if err != nil {
		return 0, fmt.Errorf("M: %w", err)
	}
	defer f.Close()
	cmd := exec.Command(m.Command, m.Args...)
	cmd.Env = append(os.Environ(), m.Env...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = f, f, os.Stderr
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("M: %w", err)
	}
	go cmd.Wait() // reaped when it exits; the agent does not wait for it
	return cmd.Process.Pid, nil
}

// answerLocally is -local-answer.
func answerLocally(spec string) int {
	var a struct {
		Socket   string `json:"socket"`
		ID       string `json:"id"`
		Digest   string `json:"digest"`
		OptionID string `json:"optionId"`
		// Action and Content answer a question.
		Action  string          `json:"action"`
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal([]byte(spec), &a); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	conn, err := net.Dial("unix", a.Socket)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer conn.Close()
	answer := map[string]any{"op": "answer", "id": a.ID, "digest": a.Digest, "optionId": a.OptionID}
	if a.Action != "" {
		answer = map[string]any{"op": "answer", "id": a.ID, "digest": a.Digest, "action": a.Action, "content": a.Content}
	}
	req, _ := json.Marshal(answer)
	if _, err := conn.Write(append(req, '\n')); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	line, _ := bufio.NewReader(conn).ReadString('\n')
	fmt.Print(line)
	var resp struct {
		OK bool `json:"ok"`
	}
	if json.Unmarshal([]byte(line), &resp) != nil || !resp.OK {
		return 1
	}
	return 0
}

// playLogin is -login.
func playLogin(status int) int {
	args, _ := json.Marshal(flag.Args())
	fmt.Printf("fakeagent login pid=%d args=%s probe=%q\nPaste the code: ", os.Getpid(), args, os.Getenv("FAKEAGENT_PROBE"))
	line, err := bufio.NewReader(os.Stdin).ReadString('\n')
	if err != nil {
		fmt.Printf("\nno code: %v\n", err)
		return 1
	}
	fmt.Printf("logged in with code %q\n", strings.TrimRight(line, "\r\n"))
	return status
}
