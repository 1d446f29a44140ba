package notify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/acp-broker/acp-broker/elicit"
)

// localPrivateDir makes a directory only the user can open.
func localPrivateDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "sockets")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return dir
}

// localListen starts a local channel in a private test directory.
func localListen(t *testing.T) (*Local, string) {
	t.Helper()
	dir := localPrivateDir(t)
	l, err := ListenLocal(dir)
	if err != nil {
		t.Fatalf("ListenLocal: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	return l, dir
}

type localResult struct {
	ans Answer
	err error
}

// localStartAsk asks l for p in the background and returns once p is pending.
func localStartAsk(t *testing.T, l *Local, ctx context.Context, p Prompt) <-chan localResult {
	t.Helper()
	done := make(chan localResult, 1)
	go func() {
		ans, err := l.Ask(ctx, p)
		done <- localResult{ans, err}
	}()
	localWaitFor(t, l, "the prompt to be pending", func() bool { return l.pending[p.ID] != nil })
	return done
}

// localWaitFor waits until cond, called with l.mu held, is true.
func localWaitFor(t *testing.T, l *Local, what string, cond func() bool) {
	t.Helper()
	timeout := time.After(execTestWait)
	for {
		l.mu.Lock()
		ok, changed := cond(), l.changed
		l.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-changed:
		case <-timeout:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// localStillWaiting fails the test if the Ask has returned.
func localStillWaiting(t *testing.T, done <-chan localResult) {
	t.Helper()
	select {
	case r := <-done:
		t.Fatalf("Ask returned %+v, %v; want it still waiting", r.ans, r.err)
	default:
	}
}

func localPrompt(id string) Prompt {
	p := execTestPrompt()
	p.ID = id
	p.Digest = Digest([]byte("request " + id))
	return p
}

// localIDs returns the ids of a pending list.
func localIDs(list []Pending) []string {
	out := []string{}
	for _, p := range list {
		out = append(out, p.ID)
	}
	return out
}

// localWho is how the local channel names this test process as the answerer.
var localWho = fmt.Sprintf("uid %d pid %d", os.Geteuid(), os.Getpid())

func TestLocalListShowsPending(t *testing.T) {
	l, dir := localListen(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if list, err := ListPending(dir); err != nil || len(list) != 0 {
		t.Fatalf("ListPending before any Ask = %v, %v; want nothing", localIDs(list), err)
	}
	first, second := localPrompt("1-1"), localPrompt("1-2")
	localStartAsk(t, l, ctx, first)
	done := localStartAsk(t, l, ctx, second)

	list, err := ListPending(dir)
	if err != nil {
		t.Fatalf("ListPending: %v", err)
	}
	want := []Pending{{Prompt: first, Broker: os.Getpid()}, {Prompt: second, Broker: os.Getpid()}}
	if !reflect.DeepEqual(list, want) {
		t.Fatalf("ListPending = %+v\nwant %+v", list, want)
	}

	if _, err := AnswerPending(dir, second.ID, "allow"); err != nil {
		t.Fatalf("AnswerPending: %v", err)
	}
	execRecv(t, done, "the answered Ask")
	if list, err := ListPending(dir); err != nil || !reflect.DeepEqual(localIDs(list), []string{first.ID}) {
		t.Fatalf("ListPending after an answer = %v, %v; want [%s]", localIDs(list), err, first.ID)
	}
}

func TestLocalAnswerChoosesOption(t *testing.T) {
	withoutKind := func(kind string) func(*Prompt) {
		return func(p *Prompt) {
			var keep []Option
			for _, o := range p.Options {
				if o.Kind != kind {
					keep = append(keep, o)
				}
			}
			p.Options = keep
		}
	}
	tests := []struct {
		name     string
		decision string
		prompt   func(*Prompt)
		want     string // option id; "" when refused
		errHas   string
	}{
		{name: "allow", decision: "allow", want: "allow"},
		{name: "always", decision: "always", want: "always"},
		{name: "reject", decision: "reject", want: "reject"},
		{name: "reject without reject once", decision: "reject", prompt: withoutKind("reject_once"), want: "never"},
		{name: "always not offered", decision: "always", prompt: withoutKind("allow_always"), errHas: "offers no option to always"},
		{name: "unknown word", decision: "yes", errHas: `unknown answer "yes"`},
		{name: "kind is not a word", decision: "allow_once", errHas: "unknown answer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, dir := localListen(t)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			p := localPrompt("7-1")
			if tt.prompt != nil {
				tt.prompt(&p)
			}
			done := localStartAsk(t, l, ctx, p)
			got, err := AnswerPending(dir, p.ID, tt.decision)
			if tt.want == "" {
				if err == nil || !strings.Contains(err.Error(), tt.errHas) {
					t.Fatalf("AnswerPending = %v; want an error saying %q", err, tt.errHas)
				}
				localStillWaiting(t, done)
				return
			}
			if err != nil {
				t.Fatalf("AnswerPending: %v", err)
			}
			if got.ID != p.ID || got.Broker != os.Getpid() {
				t.Errorf("AnswerPending answered %s of broker %d", got.ID, got.Broker)
			}
			r := execRecv(t, done, "Ask to return")
			if want := (Answer{OptionID: tt.want, Channel: "local", Who: localWho}); r.err != nil || r.ans != want {
				t.Fatalf("Ask = %+v, %v; want %+v", r.ans, r.err, want)
			}
		})
	}
}

// Answers that must be refused leave the Ask waiting for a good one.
func TestLocalRefusals(t *testing.T) {
	l, dir := localListen(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := localPrompt("9-1")
	done := localStartAsk(t, l, ctx, p)

	refused := []struct {
		name   string
		req    localRequest
		errHas string
	}{
		{"wrong digest", localRequest{Op: "answer", ID: p.ID, Digest: Digest([]byte("another request")), OptionID: "allow"}, "digest mismatch"},
		{"no digest", localRequest{Op: "answer", ID: p.ID, OptionID: "allow"}, "digest mismatch"},
		{"unknown id", localRequest{Op: "answer", ID: "9-2", Digest: p.Digest, OptionID: "allow"}, `no pending request "9-2"`},
		{"option not offered", localRequest{Op: "answer", ID: p.ID, Digest: p.Digest, OptionID: "sudo"}, `option "sudo" was not offered`},
		{"decision not offered", localRequest{Op: "answer", ID: p.ID, Digest: p.Digest, Decision: "allow_forever"}, "no allow_forever option"},
		{"no option", localRequest{Op: "answer", ID: p.ID, Digest: p.Digest}, "names no option"},
		{"unknown op", localRequest{Op: "allow", ID: p.ID, Digest: p.Digest, OptionID: "allow"}, `unknown op "allow"`},
	}
	for _, tt := range refused {
		resp, err := callLocal(l.Path(), tt.req)
		if err != nil { // callLocal's error is the refusal of what is not an answer
			resp.Error = err.Error()
		}
		if resp.OK || !strings.Contains(resp.Error, tt.errHas) {
			t.Errorf("%s: response %+v; want refused with %q", tt.name, resp, tt.errHas)
		}
		localStillWaiting(t, done)
	}
	if _, err := AnswerPending(dir, "9-2", "allow"); err == nil || !strings.Contains(err.Error(), `no pending request "9-2"`) {
		t.Errorf("AnswerPending for an unknown id = %v; want no pending request", err)
	}
	if list, err := ListPending(dir); err != nil || !reflect.DeepEqual(localIDs(list), []string{p.ID}) {
		t.Fatalf("after refusals ListPending = %v, %v; want [%s]", localIDs(list), err, p.ID)
	}

	// The right answer by decision is taken, and the second is refused.
	resp, err := callLocal(l.Path(), localRequest{Op: "answer", ID: p.ID, Digest: p.Digest, Decision: "reject_once"})
	if err != nil || !resp.OK || resp.OptionID != "reject" {
		t.Fatalf("answer = %+v, %v; want ok, reject", resp, err)
	}
	r := execRecv(t, done, "Ask to return")
	if want := (Answer{OptionID: "reject", Channel: "local", Who: localWho}); r.err != nil || r.ans != want {
		t.Fatalf("Ask = %+v, %v; want %+v", r.ans, r.err, want)
	}
	resp, err = callLocal(l.Path(), localRequest{Op: "answer", ID: p.ID, Digest: p.Digest, OptionID: "allow"})
	if err != nil || resp.OK || !strings.Contains(resp.Error, "already answered") {
		t.Errorf("second answer = %+v, %v; want refused: already answered", resp, err)
	}
	if _, err := AnswerPending(dir, p.ID, "allow"); err == nil {
		t.Errorf("AnswerPending after the answer succeeded")
	}
}

// Requests that are not JSON, too long or never finished get an error
// response or are cut off; the server goes on serving.
func TestLocalBadRequests(t *testing.T) {
	l, dir := localListen(t)
	for _, tt := range []struct {
		name, send, errHas string
	}{
		{"not json", "allow 9-1\n", "bad request"},
		{"two objects", `{"op":"list"}{"op":"list"}` + "\n", "bad request"},
		{"too long", `{"op":"list","id":"` + strings.Repeat("x", localMaxRequest) + `"}` + "\n", "longer than"},
		{"nothing", "", "reading the request"},
	} {
		conn, err := net.Dial("unix", l.Path())
		if err != nil {
			t.Fatal(err)
		}
		conn.SetDeadline(time.Now().Add(execTestWait))
		// The server may answer before it has read everything.
		go func() {
			io.WriteString(conn, tt.send)
			conn.(*net.UnixConn).CloseWrite()
		}()
		// The server does not read what it refuses, so the connection may be
		// reset after its response: read the response line only.
		data, err := readLine(conn, localMaxResponse)
		conn.Close()
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		var resp localResponse
		if err := json.Unmarshal(data, &resp); err != nil || resp.OK || !strings.Contains(resp.Error, tt.errHas) {
			t.Errorf("%s: response %q; want an error saying %q", tt.name, data, tt.errHas)
		}
	}
	if _, err := ListPending(dir); err != nil {
		t.Fatalf("ListPending after bad requests: %v", err)
	}
}

// A client that connects and sends nothing does not keep Close waiting.
func TestLocalCloseDoesNotWaitForStuckClient(t *testing.T) {
	// Without the cut-off, Close would wait for the client's timeout.
	defer func(d time.Duration) { localIOTimeout = d }(localIOTimeout)
	localIOTimeout = time.Hour
	l, dir := localListen(t)
	conn, err := net.Dial("unix", l.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// Connections are accepted in order: once a later one was served, the
	// stuck one is being served.
	if _, err := ListPending(dir); err != nil {
		t.Fatal(err)
	}
	closed := make(chan error, 1)
	go func() { closed <- l.Close() }()
	if err := execRecv(t, closed, "Close"); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

// An answer that comes after the request ended elsewhere is refused and
// never delivered.
func TestLocalAnswerAfterCancel(t *testing.T) {
	l, dir := localListen(t)
	ctx, cancel := context.WithCancelCause(context.Background())
	p := localPrompt("3-1")
	done := localStartAsk(t, l, ctx, p)
	cancel(&Outcome{By: "editor", Decision: "allow"})

	// Refused even before Ask has noticed.
	resp, err := callLocal(l.Path(), localRequest{Op: "answer", ID: p.ID, Digest: p.Digest, OptionID: "reject"})
	if err != nil || resp.OK || !strings.Contains(resp.Error, "no longer pending: answered in the editor: allowed") {
		t.Errorf("answer after cancel = %+v, %v; want refused", resp, err)
	}
	r := execRecv(t, done, "Ask to return")
	if r.err != context.Canceled || r.ans != (Answer{}) {
		t.Fatalf("Ask = %+v, %v; want context.Canceled", r.ans, r.err)
	}
	if list, err := ListPending(dir); err != nil || len(list) != 0 {
		t.Errorf("ListPending after cancel = %v, %v; want nothing", localIDs(list), err)
	}
	if _, err := AnswerPending(dir, p.ID, "allow"); err == nil {
		t.Errorf("AnswerPending after cancel succeeded")
	}
	resp, err = callLocal(l.Path(), localRequest{Op: "answer", ID: p.ID, Digest: p.Digest, OptionID: "reject"})
	if err != nil || resp.OK || !strings.Contains(resp.Error, "answered in the editor: allowed") {
		t.Errorf("answer after Ask returned = %+v, %v; want refused", resp, err)
	}

	// A timed-out request says so.
	ctx, stop := context.WithTimeout(context.Background(), time.Nanosecond)
	defer stop()
	<-ctx.Done()
	if _, err := l.Ask(ctx, localPrompt("3-2")); err != context.DeadlineExceeded {
		t.Errorf("Ask with an ended ctx = %v; want context.DeadlineExceeded", err)
	}
}

// Between ctx's end and Ask's noticing it, an answer is already refused.
func TestLocalTakeRefusesEndedAsk(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	p := localPrompt("3-3")
	l := &Local{ctx: context.Background(), pending: map[string]*localAsk{}, finished: map[string]string{}, changed: make(chan struct{})}
	a := &localAsk{ctx: ctx, p: p, answer: make(chan Answer, 1)}
	l.pending[p.ID] = a
	cancel(&Outcome{By: "phone", Decision: "deny"})
	_, err := l.take(localRequest{Op: "answer", ID: p.ID, Digest: p.Digest, OptionID: "allow"}, "test")
	if err == nil || !strings.Contains(err.Error(), "answered on phone: rejected") || a.answered || len(a.answer) != 0 {
		t.Fatalf("take after ctx ended = %v, answered %v; want refused", err, a.answered)
	}
}

// Between the first answer and Ask's return, a second is already refused.
func TestLocalTakeOnce(t *testing.T) {
	p := localPrompt("3-4")
	l := &Local{ctx: context.Background(), pending: map[string]*localAsk{}, finished: map[string]string{}, changed: make(chan struct{})}
	a := &localAsk{ctx: context.Background(), p: p, answer: make(chan Answer, 1)}
	l.pending[p.ID] = a
	if _, err := l.take(localRequest{Op: "answer", ID: p.ID, Digest: p.Digest, OptionID: "reject"}, "first"); err != nil {
		t.Fatalf("first take: %v", err)
	}
	// Ask has taken the answer from the channel but not yet returned.
	if got := <-a.answer; got.OptionID != "reject" || got.Who != "first" {
		t.Fatalf("the answer delivered is %+v", got)
	}
	_, err := l.take(localRequest{Op: "answer", ID: p.ID, Digest: p.Digest, OptionID: "allow"}, "second")
	if err == nil || !strings.Contains(err.Error(), "already answered") || len(a.answer) != 0 {
		t.Fatalf("second take = %v; want refused: already answered", err)
	}
}

func TestLocalAskNeedsIDAndDigest(t *testing.T) {
	l, _ := localListen(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, p := range []Prompt{{Digest: "d", Options: execTestPrompt().Options}, {ID: "1-1", Options: execTestPrompt().Options}} {
		if _, err := l.Ask(ctx, p); !errors.Is(err, ErrNoAnswer) {
			t.Errorf("Ask(%+v) = %v; want no answer", p, err)
		}
	}
	p := localPrompt("1-1")
	localStartAsk(t, l, ctx, p)
	if _, err := l.Ask(ctx, p); err == nil || !strings.Contains(err.Error(), "already pending") {
		t.Errorf("Ask of a pending id = %v; want already pending", err)
	}
}

func localMode(t *testing.T, path string) fs.FileMode {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode()
}

func TestLocalDirAndSocketModes(t *testing.T) {
	runtime := t.TempDir()
	t.Setenv("XDG_RUNTIME_DIR", runtime)
	dir, err := LocalDir()
	if err != nil {
		t.Fatalf("LocalDir: %v", err)
	}
	if want := filepath.Join(runtime, "acp-broker"); dir != want {
		t.Errorf("LocalDir = %s, want %s", dir, want)
	}
	if m := localMode(t, dir); m != fs.ModeDir|0o700 {
		t.Errorf("directory mode %v, want drwx------", m)
	}
	if again, err := LocalDir(); err != nil || again != dir {
		t.Errorf("LocalDir again = %s, %v", again, err)
	}
	l, err := ListenLocal(dir)
	if err != nil {
		t.Fatalf("ListenLocal: %v", err)
	}
	defer l.Close()
	if want := filepath.Join(dir, strconv.Itoa(os.Getpid())+".sock"); l.Path() != want {
		t.Errorf("socket %s, want %s", l.Path(), want)
	}
	if m := localMode(t, l.Path()); m != fs.ModeSocket|0o600 {
		t.Errorf("socket mode %v, want Srw-------", m)
	}
	if _, err := ListenLocal(dir); err == nil {
		t.Errorf("a second ListenLocal in the same process took the socket")
	}
}

func TestLocalDirFallback(t *testing.T) {
	for _, runtime := range []string{"", "relative/run"} {
		tmp := t.TempDir()
		t.Setenv("TMPDIR", tmp)
		t.Setenv("XDG_RUNTIME_DIR", runtime)
		dir, err := LocalDir()
		if err != nil {
			t.Fatalf("XDG_RUNTIME_DIR=%q: LocalDir: %v", runtime, err)
		}
		if want := filepath.Join(tmp, "acp-broker-"+strconv.Itoa(os.Geteuid())); dir != want {
			t.Errorf("XDG_RUNTIME_DIR=%q: LocalDir = %s, want %s", runtime, dir, want)
		}
		if m := localMode(t, dir); m != fs.ModeDir|0o700 {
			t.Errorf("directory mode %v, want drwx------", m)
		}
	}
}

// A socket directory that is not private is refused by the broker and by
// the client, and no socket is made in it.
func TestLocalDirRefused(t *testing.T) {
	tests := []struct {
		name   string
		make   func(t *testing.T, dir string)
		errHas string
		root   bool
	}{
		{"world accessible", func(t *testing.T, dir string) { localChmod(t, dir, 0o777) }, "others can open it (mode 0777)", false},
		{"group readable", func(t *testing.T, dir string) { localChmod(t, dir, 0o750) }, "others can open it (mode 0750)", false},
		{"owned by someone else", func(t *testing.T, dir string) {
			if err := os.Chown(dir, 1000, 1000); err != nil {
				t.Fatal(err)
			}
		}, "owned by uid 1000", true},
		{"symlink", func(t *testing.T, dir string) {
			if err := os.Remove(dir); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(t.TempDir(), dir); err != nil {
				t.Fatal(err)
			}
		}, "not a directory", false},
		{"file", func(t *testing.T, dir string) {
			if err := os.Remove(dir); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(dir, nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}, "not a directory", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.root && os.Geteuid() != 0 {
				t.Skip("needs root to chown")
			}
			runtime := t.TempDir()
			t.Setenv("XDG_RUNTIME_DIR", runtime)
			dir := filepath.Join(runtime, "acp-broker")
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			tt.make(t, dir)
			if _, err := LocalDir(); err == nil || !strings.Contains(err.Error(), tt.errHas) {
				t.Errorf("LocalDir = %v; want an error saying %q", err, tt.errHas)
			}
			if l, err := ListenLocal(dir); err == nil {
				l.Close()
				t.Errorf("ListenLocal took the directory")
			}
			if _, err := ListPending(dir); err == nil {
				t.Errorf("ListPending read the directory")
			}
			if _, err := AnswerPending(dir, "1-1", "allow"); err == nil {
				t.Errorf("AnswerPending used the directory")
			}
			if _, err := os.Lstat(filepath.Join(dir, strconv.Itoa(os.Getpid())+".sock")); err == nil {
				t.Errorf("a socket was made: %v", err)
			}
		})
	}
}

func localChmod(t *testing.T, path string, m fs.FileMode) {
	t.Helper()
	if err := os.Chmod(path, m); err != nil {
		t.Fatal(err)
	}
}

// localDeadPid returns the pid of a process that has exited and been reaped.
func localDeadPid(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}

// localStaleSocket leaves a socket file at path that nobody listens on.
func localStaleSocket(t *testing.T, path string) {
	t.Helper()
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()
}

func TestLocalStaleSockets(t *testing.T) {
	dir := localPrivateDir(t)
	dead := filepath.Join(dir, strconv.Itoa(localDeadPid(t))+".sock")
	localStaleSocket(t, dead)
	// A socket of a dead pid that someone listens on (a broker in another
	// pid namespace) is kept.
	foreign := filepath.Join(dir, strconv.Itoa(localDeadPid(t))+".sock")
	ln, err := net.Listen("unix", foreign)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	// A dead socket with this process's pid is replaced.
	localStaleSocket(t, filepath.Join(dir, strconv.Itoa(os.Getpid())+".sock"))
	// A socket of a live process is kept even if nobody listens.
	live := filepath.Join(dir, "1.sock")
	localStaleSocket(t, live)

	l, err := ListenLocal(dir)
	if err != nil {
		t.Fatalf("ListenLocal: %v", err)
	}
	defer l.Close()
	if _, err := os.Lstat(dead); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the dead broker's socket is still there: %v", err)
	}
	for _, keep := range []string{foreign, live} {
		if _, err := os.Lstat(keep); err != nil {
			t.Errorf("%s was removed: %v", keep, err)
		}
	}

	// ListPending skips sockets nobody listens on, without an error.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	localStaleSocket(t, dead)
	p := localPrompt("5-1")
	localStartAsk(t, l, ctx, p)
	go func() { // the foreign listener accepts and says nothing useful
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			readLine(c, localMaxRequest)
			io.WriteString(c, `{"ok":false,"error":"not a broker"}`+"\n")
			c.Close()
		}
	}()
	list, err := ListPending(dir)
	if !reflect.DeepEqual(localIDs(list), []string{p.ID}) {
		t.Errorf("ListPending = %v, want [%s]", localIDs(list), p.ID)
	}
	// The live but failing one is reported.
	if err == nil || !strings.Contains(err.Error(), "not a broker") || strings.Contains(err.Error(), filepath.Base(dead)) {
		t.Errorf("ListPending error = %v; want only the failing listener's", err)
	}
}

func TestLocalClose(t *testing.T) {
	l, dir := localListen(t)
	done := localStartAsk(t, l, context.Background(), localPrompt("6-1"))
	if err := l.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	r := execRecv(t, done, "Ask to return")
	if !errors.Is(r.err, ErrNoAnswer) || r.ans != (Answer{}) {
		t.Errorf("pending Ask after Close = %+v, %v; want no answer", r.ans, r.err)
	}
	if _, err := os.Lstat(l.Path()); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the socket is still there: %v", err)
	}
	if _, err := l.Ask(context.Background(), localPrompt("6-2")); !errors.Is(err, ErrNoAnswer) {
		t.Errorf("Ask after Close = %v; want no answer", err)
	}
	if list, err := ListPending(dir); err != nil || len(list) != 0 {
		t.Errorf("ListPending after Close = %v, %v; want nothing", localIDs(list), err)
	}
	if err := l.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// Many answers at once for one request: exactly one is taken, and it is
// the one Ask returns. Run it with -race -count=20.
func TestLocalOneAnswerWins(t *testing.T) {
	l, dir := localListen(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := localPrompt("8-1")
	done := localStartAsk(t, l, ctx, p)

	decisions := []string{"allow", "always", "reject"}
	options := map[string]string{"allow": "allow", "always": "always", "reject": "reject"}
	const answerers = 20
	start := make(chan struct{})
	errs := make([]error, answerers)
	var wg sync.WaitGroup
	for i := range answerers {
		wg.Go(func() {
			<-start
			_, errs[i] = AnswerPending(dir, p.ID, decisions[i%len(decisions)])
		})
	}
	close(start)
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	execRecv(t, finished, "the answerers")

	winner := -1
	for i, err := range errs {
		if err == nil {
			if winner >= 0 {
				t.Fatalf("answerers %d and %d both won", winner, i)
			}
			winner = i
		}
	}
	if winner < 0 {
		t.Fatalf("no answer was taken: %v", errors.Join(errs...))
	}
	r := execRecv(t, done, "Ask to return")
	want := Answer{OptionID: options[decisions[winner%len(decisions)]], Channel: "local", Who: localWho}
	if r.err != nil || r.ans != want {
		t.Fatalf("Ask = %+v, %v; want the winner's %+v", r.ans, r.err, want)
	}
}

// The broker serves only its own user, whatever the file modes say.
func TestLocalRefusesOtherUsers(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run a client as another user")
	}
	// Both the socket and a copy of the test binary must be reachable by
	// uid 1000; the modes are opened after ListenLocal checked them.
	shared, err := os.MkdirTemp("", "notify-peer-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(shared) })
	localChmod(t, shared, 0o711)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// Copied by cp, not written here: a process forked while this one held
	// the copy open for writing would make its exec fail with ETXTBSY.
	bin := filepath.Join(shared, "notify.test")
	if out, err := exec.Command("cp", self, bin).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v: %s", err, out)
	}
	if err := os.Chmod(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(shared, "sockets")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	l, err := ListenLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	localChmod(t, dir, 0o711)
	localChmod(t, l.Path(), 0o666)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := localPrompt("2-1")
	done := localStartAsk(t, l, ctx, p)

	for _, req := range []localRequest{
		{Op: "list"},
		{Op: "answer", ID: p.ID, Digest: p.Digest, OptionID: "allow"},
	} {
		line, _ := json.Marshal(req)
		cmd := exec.Command(bin, "-test.run=^TestLocalHelperClient$")
		cmd.Dir = "/"
		cmd.Env = append(os.Environ(), "NOTIFY_HELPER_SOCKET="+l.Path(), "NOTIFY_HELPER_REQUEST="+string(line))
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 1000, Gid: 1000}}
		cmd.WaitDelay = execTestWait
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("the helper as uid 1000: %v: %s", err, out)
		}
		got := string(out)
		if !strings.Contains(got, `"error":"permission denied"`) || strings.Contains(got, p.ID) || strings.Contains(got, `"ok":true`) {
			t.Errorf("%s as uid 1000: response %q; want permission denied", req.Op, got)
		}
	}
	localStillWaiting(t, done)
	localChmod(t, dir, 0o700)
	if list, err := ListPending(dir); err != nil || len(list) != 1 {
		t.Errorf("ListPending = %v, %v; want the prompt still pending", localIDs(list), err)
	}
}

// TestLocalHelperClient is the client TestLocalRefusesOtherUsers runs as
// another user: it sends one request line and prints the response.
func TestLocalHelperClient(t *testing.T) {
	sock := os.Getenv("NOTIFY_HELPER_SOCKET")
	if sock == "" {
		return
	}
	conn, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(execTestWait))
	// The broker refuses a stranger without reading: the write may fail.
	io.WriteString(conn, os.Getenv("NOTIFY_HELPER_REQUEST")+"\n")
	data, err := readLine(conn, localMaxResponse)
	if err != nil {
		t.Fatal(err)
	}
	os.Stdout.Write(data)
}

// FuzzLocalRequest sends request lines to a channel with one pending
// prompt: whatever the line, an answer is taken only with the prompt's
// digest and an offered option, and the response is one JSON object.
func FuzzLocalRequest(f *testing.F) {
	p := localPrompt("4-1")
	for _, s := range []string{
		`{"op":"list"}`,
		`{"op":"answer","id":"4-1","digest":"` + p.Digest + `","optionId":"allow"}`,
		`{"op":"answer","id":"4-1","digest":"` + p.Digest + `","decision":"reject_always"}`,
		`{"op":"answer","id":"4-1","digest":"x","optionId":"allow"}`,
		`{"op":"answer","id":"4-1","digest":"` + p.Digest + `","optionId":"sudo"}`,
		`{"op":"answer","ID":"4-1","Digest":"` + p.Digest + `","OptionId":"allow"}`,
		`{"op":"answer","id":"4-1","digest":"` + p.Digest + `","optionId":"allow","optionId":"sudo"}`,
		`{"op":"answer"}`, `{}`, `[]`, `null`, `{"op":"list"} {}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		l := &Local{ctx: ctx, pid: 1, pending: map[string]*localAsk{}, finished: map[string]string{}, changed: make(chan struct{})}
		a := &localAsk{ctx: ctx, p: p, answer: make(chan Answer, 1)}
		l.pending[p.ID] = a
		resp := l.serveRequest(line, "fuzz")
		if _, err := json.Marshal(resp); err != nil {
			t.Fatal(err)
		}
		if resp.OK == (resp.Error != "") {
			t.Fatalf("response %+v is both or neither ok and an error", resp)
		}
		var req localRequest
		if json.Unmarshal(line, &req) != nil || req.Op != "answer" {
			if a.answered {
				t.Fatalf("%q answered the prompt", line)
			}
			return
		}
		if !a.answered {
			return
		}
		if !resp.OK || req.ID != p.ID || req.Digest != p.Digest {
			t.Fatalf("%q answered the prompt: %+v", line, resp)
		}
		ans := <-a.answer
		if _, err := p.Choose(ans.OptionID, ""); err != nil {
			t.Fatalf("%q chose %q, not offered", line, ans.OptionID)
		}
	})
}

// The tests answer from the process that listens; only the test below
// guards it as a broker does.
func init() { localGuarded = func() int { return 0 } }

// TestLocalRefusesTheAgentsProcesses: a peer whose parent chain reaches the
// broker (here: the test process itself, and a child of it) or another
// broker listening in the same directory cannot answer or list; the refusal
// reaches the prompt's reporter and the prompt stays pending.
func TestLocalRefusesTheAgentsProcesses(t *testing.T) {
	l, dir := localListen(t)
	localGuarded = os.Getpid
	defer func() { localGuarded = func() int { return 0 } }()

	var refusals []string
	var mu sync.Mutex
	ctx := WithRefusals(context.Background(), func(why string) {
		mu.Lock()
		refusals = append(refusals, why)
		mu.Unlock()
	})
	p := execTestPrompt()
	p.Digest = "d1"
	done := localStartAsk(t, l, ctx, p)
	resp, err := callLocal(l.Path(), localRequest{Op: "answer", ID: p.ID, Digest: p.Digest, Decision: "allow_always"})
	if err != nil || resp.OK || !strings.Contains(resp.Error, "runs under this broker") {
		t.Fatalf("an answer from the broker's own tree: %+v, %v", resp, err)
	}
	if _, err := ListPending(dir); err == nil || !strings.Contains(err.Error(), "runs under this broker") {
		t.Fatalf("a list from the broker's own tree: %v", err)
	}
	mu.Lock()
	if len(refusals) != 1 || !strings.Contains(refusals[0], fmt.Sprintf("pid %d", os.Getpid())) {
		t.Errorf("refusals reported = %q", refusals)
	}
	mu.Unlock()
	select {
	case r := <-done:
		t.Fatalf("the prompt ended: %+v", r)
	default:
	}

	child := exec.Command("sleep", "5")
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = child.Process.Kill(); _ = child.Wait() }()
	if why := l.agentsProcess(child.Process.Pid); !strings.Contains(why, "runs under this broker") {
		t.Errorf("a child of the broker: %q", why)
	}
	if why := l.agentsProcess(os.Getppid()); why != "" {
		t.Errorf("a process the broker did not start: %q", why)
	}
	if why := l.agentsProcess(1 << 30); !strings.Contains(why, "cannot tell") {
		t.Errorf("a process that is gone: %q", why)
	}

	// Under another broker: a live socket named after an ancestor.
	localGuarded = func() int { return 0 }
	other, err := net.Listen("unix", filepath.Join(dir, strconv.Itoa(os.Getppid())+".sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	go func() {
		for {
			c, err := other.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	if why := l.agentsProcess(os.Getpid()); !strings.Contains(why, fmt.Sprintf("the broker with pid %d", os.Getppid())) {
		t.Errorf("a process under another broker: %q", why)
	}
}

// TestLocalSaysWhyAPromptWasWithdrawn: a prompt whose asker withdrew it with
// a cause of its own (a cancelled turn) refuses answers in those words.
func TestLocalSaysWhyAPromptWasWithdrawn(t *testing.T) {
	l, _ := localListen(t)
	ctx, cancel := context.WithCancelCause(context.Background())
	p := execTestPrompt()
	p.Digest = "d2"
	done := localStartAsk(t, l, ctx, p)
	cancel(errors.New("withdrawn: the turn was cancelled"))
	<-done
	resp, err := callLocal(l.Path(), localRequest{Op: "answer", ID: p.ID, Digest: p.Digest, Decision: "allow_once"})
	if err != nil || resp.OK || !strings.Contains(resp.Error, "the turn was cancelled") {
		t.Fatalf("an answer to a withdrawn prompt: %+v, %v", resp, err)
	}
}

// localDeploySchema is a form with a field of each kind: a required
// choice with titles, an optional text, a bounded integer, a multi-select
// and a boolean.
const localDeploySchema = `{"type":"object","properties":{` +
	`"target":{"type":"string","title":"Deploy target","oneOf":[{"const":"staging","title":"Staging"},{"const":"production","title":"Production"}]},` +
	`"notes":{"type":"string","title":"Anything else?"},` +
	`"replicas":{"type":"integer","minimum":1,"maximum":5},` +
	`"regions":{"type":"array","items":{"enum":["eu","us"]},"minItems":1},` +
	`"notify":{"type":"boolean"}},"required":["target"]}`

// localQuestion is a form question asking where to deploy.
func localQuestion(id string) Prompt {
	return Prompt{
		Version:         PromptVersion,
		ID:              id,
		Session:         "sess_1",
		Agent:           "claude-agent-acp",
		Message:         "Deploy where?",
		Mode:            "form",
		RequestedSchema: json.RawMessage(localDeploySchema),
		Digest:          Digest([]byte("question " + id)),
	}
}

// localURLQuestion is a URL question: consent to open a sign-in page.
func localURLQuestion(id string) Prompt {
	return Prompt{
		Version:       PromptVersion,
		ID:            id,
		Session:       "sess_1",
		Agent:         "codex-acp",
		Message:       "Sign in to GitHub",
		Mode:          "url",
		URL:           "https://github.com/login/oauth/authorize?client_id=abc&state=xyz",
		ElicitationID: "el-1",
		Digest:        Digest([]byte("url question " + id)),
	}
}

// A question is answered with an action and, for an accepted form, content
// that fits its schema; anything else is refused and the question stays
// pending, listed as it was.
func TestLocalQuestionAnswers(t *testing.T) {
	valid := `{"target":"production","notes":"after 5pm","replicas":3,"regions":["eu","us"],"notify":true}`
	refused := []struct {
		name   string
		req    func(p Prompt) localRequest
		errHas string
	}{
		{"missing required field", func(p Prompt) localRequest {
			return localRequest{Op: "answer", ID: p.ID, Digest: p.Digest, Action: "accept", Content: json.RawMessage(`{"notes":"x"}`)}
		}, "target"},
		{"not a choice", func(p Prompt) localRequest {
			return localRequest{Op: "answer", ID: p.ID, Digest: p.Digest, Action: "accept", Content: json.RawMessage(`{"target":"moon"}`)}
		}, "field"},
		{"out of bounds", func(p Prompt) localRequest {
			return localRequest{Op: "answer", ID: p.ID, Digest: p.Digest, Action: "accept", Content: json.RawMessage(`{"target":"staging","replicas":9}`)}
		}, "replicas"},
		{"field the form lacks", func(p Prompt) localRequest {
			return localRequest{Op: "answer", ID: p.ID, Digest: p.Digest, Action: "accept", Content: json.RawMessage(`{"target":"staging","sudo":true}`)}
		}, "sudo"},
		{"item not offered", func(p Prompt) localRequest {
			return localRequest{Op: "answer", ID: p.ID, Digest: p.Digest, Action: "accept", Content: json.RawMessage(`{"target":"staging","regions":["mars"]}`)}
		}, "regions"},
		{"not an object", func(p Prompt) localRequest {
			return localRequest{Op: "answer", ID: p.ID, Digest: p.Digest, Action: "accept", Content: json.RawMessage(`["staging"]`)}
		}, "not a JSON object"},
		{"accept without content", func(p Prompt) localRequest { // as {}, which lacks target
			return localRequest{Op: "answer", ID: p.ID, Digest: p.Digest, Action: "accept"}
		}, "target"},
		{"content with decline", func(p Prompt) localRequest {
			return localRequest{Op: "answer", ID: p.ID, Digest: p.Digest, Action: "decline", Content: json.RawMessage(valid)}
		}, "a decline carries no content"},
		{"unknown action", func(p Prompt) localRequest {
			return localRequest{Op: "answer", ID: p.ID, Digest: p.Digest, Action: "allow"}
		}, `action "allow" is not accept, decline or cancel`},
		{"no action", func(p Prompt) localRequest {
			return localRequest{Op: "answer", ID: p.ID, Digest: p.Digest}
		}, "names no action"},
		{"an option", func(p Prompt) localRequest {
			return localRequest{Op: "answer", ID: p.ID, Digest: p.Digest, OptionID: "allow", Action: "accept", Content: json.RawMessage(valid)}
		}, "not an option"},
		{"a decision", func(p Prompt) localRequest {
			return localRequest{Op: "answer", ID: p.ID, Digest: p.Digest, Decision: "allow_once"}
		}, "not an option"},
		{"wrong digest", func(p Prompt) localRequest {
			return localRequest{Op: "answer", ID: p.ID, Digest: Digest([]byte("another question")), Action: "accept", Content: json.RawMessage(valid)}
		}, "digest mismatch"},
	}
	answers := []struct {
		name string
		req  func(p Prompt) localRequest
		want Answer
	}{
		{"accept", func(p Prompt) localRequest {
			return localRequest{Op: "answer", ID: p.ID, Digest: p.Digest, Action: "accept", Content: json.RawMessage(valid)}
		}, Answer{Action: "accept", Content: valid, Channel: "local", Who: localWho}},
		{"accept the required field only", func(p Prompt) localRequest {
			return localRequest{Op: "answer", ID: p.ID, Digest: p.Digest, Action: "accept", Content: json.RawMessage(`{"target":"staging"}`)}
		}, Answer{Action: "accept", Content: `{"target":"staging"}`, Channel: "local", Who: localWho}},
		{"decline", func(p Prompt) localRequest {
			return localRequest{Op: "answer", ID: p.ID, Digest: p.Digest, Action: "decline"}
		}, Answer{Action: "decline", Channel: "local", Who: localWho}},
		{"cancel", func(p Prompt) localRequest {
			return localRequest{Op: "answer", ID: p.ID, Digest: p.Digest, Action: "cancel"}
		}, Answer{Action: "cancel", Channel: "local", Who: localWho}},
	}
	for _, tt := range answers {
		t.Run(tt.name, func(t *testing.T) {
			l, dir := localListen(t)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			p := localQuestion("12-1")
			done := localStartAsk(t, l, ctx, p)
			for _, r := range refused {
				resp, err := callLocal(l.Path(), r.req(p))
				if err != nil || resp.OK || !strings.Contains(resp.Error, r.errHas) {
					t.Errorf("%s: response %+v, %v; want refused with %q", r.name, resp, err, r.errHas)
				}
				localStillWaiting(t, done)
			}
			list, err := ListPending(dir)
			if want := []Pending{{Prompt: p, Broker: os.Getpid()}}; err != nil || !reflect.DeepEqual(list, want) {
				t.Fatalf("after the refusals ListPending = %+v, %v\nwant %+v", list, err, want)
			}
			resp, err := callLocal(l.Path(), tt.req(p))
			if err != nil || !resp.OK || resp.Action != tt.want.Action || resp.OptionID != "" {
				t.Fatalf("answer = %+v, %v; want ok, %s", resp, err, tt.want.Action)
			}
			r := execRecv(t, done, "Ask to return")
			if r.err != nil || r.ans != tt.want {
				t.Fatalf("Ask = %+v, %v; want %+v", r.ans, r.err, tt.want)
			}
			if list, err := ListPending(dir); err != nil || len(list) != 0 {
				t.Errorf("ListPending after the answer = %v, %v; want nothing", localIDs(list), err)
			}
			resp, err = callLocal(l.Path(), localRequest{Op: "answer", ID: p.ID, Digest: p.Digest, Action: "decline"})
			if err != nil || resp.OK || !strings.Contains(resp.Error, "already answered") {
				t.Errorf("second answer = %+v, %v; want refused: already answered", resp, err)
			}
		})
	}
}

// A URL question is consent: accept carries no content, and the URL is
// listed whole.
func TestLocalURLQuestion(t *testing.T) {
	l, dir := localListen(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := localURLQuestion("13-1")
	done := localStartAsk(t, l, ctx, p)
	resp, err := callLocal(l.Path(), localRequest{Op: "answer", ID: p.ID, Digest: p.Digest, Action: "accept", Content: json.RawMessage(`{}`)})
	if err != nil || resp.OK || !strings.Contains(resp.Error, "carries no content") {
		t.Errorf("accept with content = %+v, %v; want refused", resp, err)
	}
	localStillWaiting(t, done)
	q, err := FindPending(dir, p.ID)
	if err != nil || q.URL != p.URL || q.Mode != "url" || q.ElicitationID != "el-1" {
		t.Fatalf("FindPending = %+v, %v; want the URL question", q, err)
	}
	if err := AnswerQuestion(dir, q, "accept", nil); err != nil {
		t.Fatalf("AnswerQuestion: %v", err)
	}
	r := execRecv(t, done, "Ask to return")
	if want := (Answer{Action: "accept", Channel: "local", Who: localWho}); r.err != nil || r.ans != want {
		t.Fatalf("Ask = %+v, %v; want %+v", r.ans, r.err, want)
	}
}

// The client side: AnswerQuestion answers only the question as it was
// read, and the permission words do not answer a question nor the
// reverse.
func TestLocalAnswerQuestionClient(t *testing.T) {
	l, dir := localListen(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := localQuestion("14-1")
	done := localStartAsk(t, l, ctx, p)
	if _, err := AnswerPending(dir, p.ID, "allow"); err == nil || !strings.Contains(err.Error(), "is a question") {
		t.Errorf("AnswerPending of a question = %v; want refused", err)
	}
	q, err := FindPending(dir, p.ID)
	if err != nil || !reflect.DeepEqual(q, Pending{Prompt: p, Broker: os.Getpid()}) {
		t.Fatalf("FindPending = %+v, %v", q, err)
	}
	old := q
	old.Digest = Digest([]byte("the question as it was before"))
	if err := AnswerQuestion(dir, old, "decline", nil); err == nil || !strings.Contains(err.Error(), "no longer the question shown") {
		t.Errorf("AnswerQuestion of another version = %v; want refused", err)
	}
	if err := AnswerQuestion(dir, q, "accept", json.RawMessage(`{"target":"moon"}`)); err == nil || !strings.Contains(err.Error(), `"moon" is not one of`) {
		t.Errorf("AnswerQuestion with bad content = %v; want refused", err)
	}
	localStillWaiting(t, done)

	perm := localPrompt("14-2")
	permDone := localStartAsk(t, l, ctx, perm)
	pq, err := FindPending(dir, perm.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := AnswerQuestion(dir, pq, "accept", nil); err == nil || !strings.Contains(err.Error(), "not a question") {
		t.Errorf("AnswerQuestion of a permission request = %v; want refused", err)
	}
	pq.Mode = "url" // a client that lies about what it read is refused by the broker
	if err := AnswerQuestion(dir, pq, "accept", nil); err == nil || !strings.Contains(err.Error(), "is a permission request") {
		t.Errorf("an action for a permission request = %v; want refused", err)
	}
	localStillWaiting(t, permDone)

	if err := AnswerQuestion(dir, q, "cancel", nil); err != nil {
		t.Fatalf("AnswerQuestion cancel: %v", err)
	}
	if r := execRecv(t, done, "Ask to return"); r.err != nil || r.ans.Action != "cancel" {
		t.Fatalf("Ask = %+v, %v; want cancel", r.ans, r.err)
	}
}

// A question withdrawn (the turn cancelled, answered in the editor) leaves
// the list, and a late answer is refused in the withdrawal's words.
func TestLocalQuestionWithdrawn(t *testing.T) {
	l, dir := localListen(t)
	ctx, cancel := context.WithCancelCause(context.Background())
	p := localQuestion("15-1")
	done := localStartAsk(t, l, ctx, p)
	q, err := FindPending(dir, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	cancel(&Outcome{By: "editor"})
	r := execRecv(t, done, "Ask to return")
	if r.err != context.Canceled || r.ans != (Answer{}) {
		t.Fatalf("Ask = %+v, %v; want context.Canceled", r.ans, r.err)
	}
	if list, err := ListPending(dir); err != nil || len(list) != 0 {
		t.Errorf("ListPending after the withdrawal = %v, %v; want nothing", localIDs(list), err)
	}
	if err := AnswerQuestion(dir, q, "accept", json.RawMessage(`{"target":"staging"}`)); err == nil || !strings.Contains(err.Error(), `no pending request "15-1"`) {
		t.Errorf("AnswerQuestion after the withdrawal = %v; want no pending request", err)
	}
	resp, err := callLocal(l.Path(), localRequest{Op: "answer", ID: p.ID, Digest: p.Digest, Action: "decline"})
	if err != nil || resp.OK || !strings.Contains(resp.Error, "no longer pending: answered in the editor") {
		t.Errorf("a late answer = %+v, %v; want refused, saying why", resp, err)
	}
}

// A question whose answers the channel cannot check is not asked.
func TestLocalQuestionsItCannotCheck(t *testing.T) {
	l, dir := localListen(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	bad := localQuestion("16-1")
	bad.RequestedSchema = json.RawMessage(`{"type":"object","properties":{"when":{"type":"datetime"}}}`)
	noURL := localURLQuestion("16-2")
	noURL.URL = ""
	other := localQuestion("16-3")
	other.Mode = "_voice"
	for _, p := range []Prompt{bad, noURL, other} {
		done := make(chan localResult, 1)
		go func() {
			ans, err := l.Ask(ctx, p)
			done <- localResult{ans, err}
		}()
		if r := execRecv(t, done, "Ask("+p.ID+") to refuse the question"); !errors.Is(r.err, ErrNoAnswer) || r.ans != (Answer{}) {
			t.Errorf("Ask(%s) = %+v, %v; want no answer", p.ID, r.ans, r.err)
		}
	}
	if list, err := ListPending(dir); err != nil || len(list) != 0 {
		t.Errorf("ListPending = %v, %v; want nothing", localIDs(list), err)
	}
}

// The agent cannot answer its own question: a process under the broker
// (here a child of the test process, which guards itself as a broker does)
// sends a valid accept, is refused, the refusal is reported, and the
// question stays pending, unanswered.
func TestLocalRefusesTheAgentsAnswerToItsQuestion(t *testing.T) {
	// Set before the channel serves anything: its goroutines read it.
	localGuarded = os.Getpid
	defer func() { localGuarded = func() int { return 0 } }()
	l, _ := localListen(t)
	var mu sync.Mutex
	var refusals []string
	ctx := WithRefusals(context.Background(), func(why string) {
		mu.Lock()
		refusals = append(refusals, why)
		mu.Unlock()
	})
	p := localQuestion("17-1")
	done := localStartAsk(t, l, ctx, p)

	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	line, _ := json.Marshal(localRequest{Op: "answer", ID: p.ID, Digest: p.Digest, Action: "accept", Content: json.RawMessage(`{"target":"production"}`)})
	cmd := exec.Command(self, "-test.run=^TestLocalHelperClient$")
	cmd.Env = append(os.Environ(), "NOTIFY_HELPER_SOCKET="+l.Path(), "NOTIFY_HELPER_REQUEST="+string(line))
	cmd.WaitDelay = execTestWait
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the agent's process: %v: %s", err, out)
	}
	if got := string(out); !strings.Contains(got, "runs under this broker") || strings.Contains(got, `"ok":true`) {
		t.Errorf("the agent's answer: response %q; want permission denied", got)
	}
	localStillWaiting(t, done)
	mu.Lock()
	if len(refusals) != 1 || !strings.Contains(refusals[0], fmt.Sprintf("pid %d", cmd.Process.Pid)) {
		t.Errorf("refusals reported = %q; want the agent's process named", refusals)
	}
	mu.Unlock()
	l.mu.Lock()
	a := l.pending[p.ID]
	if a == nil || a.answered || len(a.answer) != 0 {
		t.Errorf("the question is no longer pending and unanswered: %+v", a)
	}
	l.mu.Unlock()
}

// FuzzLocalQuestionRequest sends request lines to a channel with one
// pending form question: whatever the line, an answer is taken only with
// the question's digest and an action, and an accept only with content
// that the form accepts.
func FuzzLocalQuestionRequest(f *testing.F) {
	p := localQuestion("18-1")
	for _, s := range []string{
		`{"op":"answer","id":"18-1","digest":"` + p.Digest + `","action":"accept","content":{"target":"staging"}}`,
		`{"op":"answer","id":"18-1","digest":"` + p.Digest + `","action":"accept","content":{"target":"staging","target":"moon"}}`,
		`{"op":"answer","id":"18-1","digest":"` + p.Digest + `","action":"accept","content":{"target":"moon"}}`,
		`{"op":"answer","id":"18-1","digest":"` + p.Digest + `","action":"accept","content":null}`,
		`{"op":"answer","id":"18-1","digest":"` + p.Digest + `","action":"decline"}`,
		`{"op":"answer","id":"18-1","digest":"` + p.Digest + `","action":"cancel","content":{}}`,
		`{"op":"answer","id":"18-1","digest":"` + p.Digest + `","optionId":"allow"}`,
		`{"op":"answer","id":"18-1","digest":"` + p.Digest + `","action":"accept","action":"decline"}`,
	} {
		f.Add([]byte(s))
	}
	form, err := elicit.ParseSchema(p.RequestedSchema)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		l := &Local{ctx: ctx, pid: 1, pending: map[string]*localAsk{}, finished: map[string]string{}, changed: make(chan struct{})}
		a := &localAsk{ctx: ctx, p: p, form: form, answer: make(chan Answer, 1)}
		l.pending[p.ID] = a
		resp := l.serveRequest(line, "fuzz")
		if resp.OK == (resp.Error != "") {
			t.Fatalf("response %+v is both or neither ok and an error", resp)
		}
		if !a.answered {
			return
		}
		var req localRequest
		if json.Unmarshal(line, &req) != nil || req.ID != p.ID || req.Digest != p.Digest {
			t.Fatalf("%q answered the question", line)
		}
		ans := <-a.answer
		switch {
		case ans.OptionID != "":
			t.Fatalf("%q answered the question with option %q", line, ans.OptionID)
		case ans.Action == "accept":
			if err := form.Validate(json.RawMessage(ans.Content)); err != nil {
				t.Fatalf("%q was accepted with content the form refuses: %v", line, err)
			}
		case ans.Action == "decline" || ans.Action == "cancel":
			if ans.Content != "" {
				t.Fatalf("%q: %s with content", line, ans.Action)
			}
		default:
			t.Fatalf("%q answered with action %q", line, ans.Action)
		}
	})
}
