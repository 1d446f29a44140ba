package notify

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/acp-broker/acp-broker/elicit"
	"github.com/acp-broker/acp-broker/internal/peercred"
)

// Limits of the local protocol.
const (
	localMaxRequest  = 64 << 10 // bytes of one request line
	localMaxResponse = 32 << 20 // bytes of one response line (a list)
	localMaxConns    = 64       // connections served at once; more are closed
	localFinished    = 1024     // finished requests remembered, to say why an answer is late
)

// localIOTimeout bounds each connection, on both sides, so that a stuck
// peer cannot wedge the other. (A variable for the tests.)
var localIOTimeout = 5 * time.Second

// localGuarded is the process whose whole tree the local channel refuses to
// serve: the broker's own, which its agent runs under. (A variable for the
// tests, which answer from the process that listens.)
var localGuarded = os.Getpid

// LocalName is the local channel's name.
const LocalName = "local"

// LocalDir returns the private directory where brokers put their sockets,
// creating it (mode 0700) if needed: $XDG_RUNTIME_DIR/acp-broker when
// XDG_RUNTIME_DIR is an absolute path, else acp-broker-UID in os.TempDir().
// It refuses a directory that is not the user's own or that others can
// open.
func LocalDir() (string, error) {
	var dir string
	if x := os.Getenv("XDG_RUNTIME_DIR"); x != "" && filepath.IsAbs(x) {
		dir = filepath.Join(x, "acp-broker")
	} else {
		dir = filepath.Join(os.TempDir(), "acp-broker-"+strconv.Itoa(os.Geteuid()))
	}
	err := os.Mkdir(dir, 0o700)
	switch {
	case err == nil:
		// The umask may have taken bits away; it never adds any.
		if err := os.Chmod(dir, 0o700); err != nil {
			return "", err
		}
	case !errors.Is(err, fs.ErrExist):
		return "", fmt.Errorf("creating the socket directory: %w", err)
	}
	if err := checkPrivateDir(dir); err != nil {
		return "", err
	}
	return dir, nil
}

// checkPrivateDir refuses dir unless it is a directory (not a link to one),
// owned by the current user, that nobody else can open.
func checkPrivateDir(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("socket directory: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("refusing the socket directory %s: it is not a directory (%s)", dir, fi.Mode().Type())
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("refusing the socket directory %s: it is owned by uid %d, not by you (uid %d)", dir, st.Uid, os.Geteuid())
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return fmt.Errorf("refusing the socket directory %s: others can open it (mode %04o); it must be 0700", dir, perm)
	}
	return nil
}

// Local is the channel answered from another terminal. Every running
// broker listens on a Unix socket in a directory only the user can open, so
// that `acp-broker pending` lists the open requests and questions of all
// the user's brokers (ListPending) and `acp-broker answer` answers one
// (AnswerPending a request; FindPending, then AnswerQuestion, a question).
//
// The protocol is one request and one response per connection, each a JSON
// object on one line:
//
//	{"op":"list"}
//	→ {"ok":true,"broker":PID,"pending":[PROMPT...]}
//	{"op":"answer","id":ID,"digest":DIGEST,"optionId":OPTION}   (or "decision":KIND)
//	→ {"ok":true,"broker":PID,"optionId":OPTION} or {"ok":false,"error":"..."}
//	{"op":"answer","id":ID,"digest":DIGEST,"action":"accept","content":{...}}   (a question)
//	→ {"ok":true,"broker":PID,"action":"accept"} or {"ok":false,"error":"..."}
//
// The broker serves only peers of its own user, checked with the socket's
// peer credentials (SO_PEERCRED; on systems other than Linux it serves
// nobody), not just the file modes, and never the agent's own processes:
// a peer whose parent chain reaches this broker or another one listening
// in the same directory is refused, for answers and for lists alike (the
// broker is its agent's child subreaper, so a process whose parent exited
// is still found under it). It takes an answer only for a request
// still pending, with that request's digest, naming an offered option (for
// a question: accept, decline or cancel, and an accepted form's content
// only if it satisfies the form's schema); the first such answer is the
// one, and every later one is refused.
type Local struct {
	path string
	ln   *net.UnixListener
	uid  int
	pid  int

	ctx   context.Context // ends when Close is called
	stop  context.CancelFunc
	conns chan struct{} // a token for each connection being served
	wg    sync.WaitGroup

	mu       sync.Mutex
	closed   bool
	seq      uint64
	pending  map[string]*localAsk
	finished map[string]string // id → why it is no longer pending
	order    []string          // finished ids, oldest first
	changed  chan struct{}     // closed and replaced when pending changes
}

// localAsk is one pending prompt.
type localAsk struct {
	ctx      context.Context // the Ask's
	p        Prompt
	form     *elicit.Form // a form question's, read once; nil otherwise
	seq      uint64
	answered bool        // an answer was taken; it is in answer
	answer   chan Answer // holds the first valid answer
}

// ListenLocal listens on dir/PID.sock (mode 0600) and serves until Close.
// dir must be private (see LocalDir). Sockets in dir left by brokers that
// are no longer running are removed.
func ListenLocal(dir string) (*Local, error) {
	if err := checkPrivateDir(dir); err != nil {
		return nil, err
	}
	removeStale(dir)
	path := socketPath(dir, os.Getpid())
	// A socket with this process's pid is a dead process's, unless this
	// process listens there already.
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode().Type() != fs.ModeSocket || !deadSocket(path) {
			return nil, fmt.Errorf("listening on %s: the path is in use", path)
		}
		_ = os.Remove(path)
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("listening for local answers: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("listening for local answers: %w", err)
	}
	ctx, stop := context.WithCancel(context.Background())
	l := &Local{
		path:     path,
		ln:       ln,
		uid:      os.Geteuid(),
		pid:      os.Getpid(),
		ctx:      ctx,
		stop:     stop,
		conns:    make(chan struct{}, localMaxConns),
		pending:  map[string]*localAsk{},
		finished: map[string]string{},
		changed:  make(chan struct{}),
	}
	l.wg.Add(1)
	go l.serve()
	return l, nil
}

// Name returns "local".
func (l *Local) Name() string { return LocalName }

// Path returns the socket's path.
func (l *Local) Path() string { return l.path }

// errLocalClosed is what Ask returns once Close was called.
var errLocalClosed = fmt.Errorf("local channel: %w: the channel was closed", ErrNoAnswer)

// Ask lists p as pending until an answer for it arrives on the socket, ctx
// ends or the channel is closed. p.ID must be unique among the pending
// prompts, and p.Digest set: an answer must carry it. A question is asked
// only if its answers can be checked (Prompt.CheckQuestion): a form whose
// schema elicit cannot read, or a URL question without a URL it can show,
// is no answer at once.
func (l *Local) Ask(ctx context.Context, p Prompt) (Answer, error) {
	if p.ID == "" || p.Digest == "" {
		return Answer{}, fmt.Errorf("local channel: %w: the prompt has no id or no digest", ErrNoAnswer)
	}
	if err := ctx.Err(); err != nil {
		return Answer{}, err
	}
	a := &localAsk{ctx: ctx, p: p, answer: make(chan Answer, 1)}
	if p.IsQuestion() {
		form, err := p.CheckQuestion()
		if err != nil {
			return Answer{}, fmt.Errorf("local channel: question %q: %w", p.ID, err)
		}
		a.form = form
	}
	l.mu.Lock()
	switch {
	case l.closed:
		l.mu.Unlock()
		return Answer{}, errLocalClosed
	case l.pending[p.ID] != nil:
		l.mu.Unlock()
		return Answer{}, fmt.Errorf("local channel: %w: request %q is already pending", ErrNoAnswer, p.ID)
	}
	l.seq++
	a.seq = l.seq
	l.pending[p.ID] = a
	delete(l.finished, p.ID)
	l.changedLocked()
	l.mu.Unlock()

	var ans Answer
	got := false
	select {
	case ans = <-a.answer:
		got = true
	case <-ctx.Done():
	case <-l.ctx.Done():
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if got || a.answered {
		// An answer taken before ctx ended wins even if ctx has ended since:
		// the caller decides which answer was first.
		if !got {
			ans = <-a.answer
		}
		l.finishLocked(p.ID, "it was already answered")
		return ans, nil
	}
	if err := ctx.Err(); err != nil {
		l.finishLocked(p.ID, endedBy(ctx))
		return Answer{}, err
	}
	l.finishLocked(p.ID, "the broker stopped listening")
	return Answer{}, errLocalClosed
}

// endedBy says why a prompt's ctx ended, in the words the other channels
// use to retract their prompts.
func endedBy(ctx context.Context) string { return retractionText(context.Cause(ctx)) }

// finishLocked moves id from the pending prompts to the finished ones.
func (l *Local) finishLocked(id, why string) {
	delete(l.pending, id)
	if _, ok := l.finished[id]; !ok {
		l.order = append(l.order, id)
	}
	l.finished[id] = why
	for len(l.order) > localFinished {
		delete(l.finished, l.order[0])
		l.order = l.order[1:]
	}
	l.changedLocked()
}

func (l *Local) changedLocked() {
	close(l.changed)
	l.changed = make(chan struct{})
}

// Close stops listening, removes the socket and waits for the connections
// being served; every pending Ask returns an error.
func (l *Local) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	l.mu.Unlock()
	l.stop()
	err := l.ln.Close() // removes the socket file
	l.wg.Wait()
	return err
}

// serve accepts connections until Close.
func (l *Local) serve() {
	defer l.wg.Done()
	var backoff time.Duration
	for {
		conn, err := l.ln.AcceptUnix()
		if err != nil {
			if l.ctx.Err() != nil {
				return
			}
			// Out of file descriptors or the like: wait a little, as
			// net/http does, rather than spin.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			t := time.NewTimer(backoff)
			select {
			case <-t.C:
			case <-l.ctx.Done():
				t.Stop()
				return
			}
			continue
		}
		backoff = 0
		select {
		case l.conns <- struct{}{}:
		default:
			conn.Close() // too many at once
			continue
		}
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			defer func() { <-l.conns }()
			l.handle(conn)
		}()
	}
}

// localRequest is a request on the socket.
type localRequest struct {
	Op       string `json:"op"`
	ID       string `json:"id,omitempty"`
	Digest   string `json:"digest,omitempty"`
	OptionID string `json:"optionId,omitempty"`
	Decision string `json:"decision,omitempty"`
	// Action and Content answer a question.
	Action  string          `json:"action,omitempty"`
	Content json.RawMessage `json:"content,omitempty"`
}

// localResponse is the response to one.
type localResponse struct {
	OK       bool     `json:"ok"`
	Error    string   `json:"error,omitempty"`
	Broker   int      `json:"broker,omitempty"`
	Pending  []Prompt `json:"pending,omitempty"`
	OptionID string   `json:"optionId,omitempty"`
	Action   string   `json:"action,omitempty"`
}

// handle serves one connection: one request, one response.
func (l *Local) handle(conn *net.UnixConn) {
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(localIOTimeout))
	// Close does not wait for a stuck client.
	defer context.AfterFunc(l.ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })()

	var resp localResponse
	uid, pid, err := peercred.Of(conn)
	switch {
	case err != nil:
		resp.Error = "permission denied: " + err.Error()
	case uid != l.uid:
		resp.Error = "permission denied"
	default:
		line, err := readLine(conn, localMaxRequest)
		if err != nil {
			resp.Error = "reading the request: " + err.Error()
			break
		}
		if why := l.agentsProcess(pid); why != "" {
			resp.Error = "permission denied: " + why
			l.refused(line, why)
			break
		}
		resp = l.serveRequest(line, fmt.Sprintf("uid %d pid %d", uid, pid))
	}
	out, _ := json.Marshal(resp)
	_, _ = conn.Write(append(out, '\n'))
}

// agentsProcess says why pid must not be served: it is this broker, or one
// of the processes under it or under another broker listening in the same
// directory (an agent's, whichever broker runs it), or its parent chain
// cannot be read. It returns "" for a process of the user's that is none
// of these.
func (l *Local) agentsProcess(pid int) string {
	chain, err := peercred.Ancestry(pid)
	if err != nil {
		return fmt.Sprintf("cannot tell whether pid %d is one of an agent's processes: %v", pid, err)
	}
	dir, guarded := filepath.Dir(l.path), localGuarded()
	for _, p := range chain {
		if p == guarded {
			return fmt.Sprintf("pid %d runs under this broker (pid %d): an agent's processes cannot answer or list its prompts", pid, guarded)
		}
		sock := socketPath(dir, p)
		if sock == l.path {
			continue
		}
		if fi, err := os.Lstat(sock); err == nil && fi.Mode().Type() == fs.ModeSocket && !deadSocket(sock) {
			return fmt.Sprintf("pid %d runs under the broker with pid %d: an agent's processes cannot answer or list prompts", pid, p)
		}
	}
	return ""
}

// refused tells the prompt a refused answer was for, if it is pending,
// that an answer to it was refused and why.
func (l *Local) refused(line []byte, why string) {
	var req localRequest
	if json.Unmarshal(line, &req) != nil || req.Op != "answer" {
		return
	}
	// Under l.mu, as take's refusals are: an answer taken after it cannot
	// write the audit line without it.
	l.mu.Lock()
	defer l.mu.Unlock()
	if a := l.pending[req.ID]; a != nil {
		a.refused(why)
	}
}

// refused reports, where the Ask's ctx carries WithRefusals' report, that
// an answer to its prompt was refused and why.
func (a *localAsk) refused(why string) {
	if report, ok := a.ctx.Value(refusalsKey{}).(func(string)); ok {
		report(why)
	}
}

type refusalsKey struct{}

// WithRefusals returns a copy of ctx for Local.Ask that carries report:
// each time the local channel refuses an answer to the pending prompt,
// because of who sent it (one of an agent's processes) or because it
// answers nothing (another version's digest, an option not offered,
// content that does not fit the form), it calls report with why, so that
// the request's audit line can say so.
func WithRefusals(ctx context.Context, report func(why string)) context.Context {
	return context.WithValue(ctx, refusalsKey{}, report)
}

// serveRequest answers one request line from a peer of the user's own.
func (l *Local) serveRequest(line []byte, who string) localResponse {
	var req localRequest
	if err := json.Unmarshal(line, &req); err != nil {
		return localResponse{Error: "bad request: " + err.Error()}
	}
	switch req.Op {
	case "list":
		return localResponse{OK: true, Broker: l.pid, Pending: l.list()}
	case "answer":
		ans, err := l.take(req, who)
		if err != nil {
			return localResponse{Error: err.Error()}
		}
		return localResponse{OK: true, Broker: l.pid, OptionID: ans.OptionID, Action: ans.Action}
	}
	return localResponse{Error: fmt.Sprintf("unknown op %q", req.Op)}
}

// list returns the pending prompts, oldest first.
func (l *Local) list() []Prompt {
	l.mu.Lock()
	asks := make([]*localAsk, 0, len(l.pending))
	for _, a := range l.pending {
		if !a.answered && a.ctx.Err() == nil {
			asks = append(asks, a)
		}
	}
	l.mu.Unlock()
	slices.SortFunc(asks, func(a, b *localAsk) int { return cmp.Compare(a.seq, b.seq) })
	out := make([]Prompt, len(asks))
	for i, a := range asks {
		out[i] = a.p
	}
	return out
}

// take completes a pending Ask with the answer req carries, if it is the
// first valid one. Every refusal leaves the Ask waiting.
func (l *Local) take(req localRequest, who string) (Answer, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	a := l.pending[req.ID]
	switch {
	case l.closed:
		return Answer{}, errors.New("the broker is no longer listening")
	case a == nil:
		if why, ok := l.finished[req.ID]; ok {
			return Answer{}, fmt.Errorf("request %q is no longer pending: %s", req.ID, why)
		}
		return Answer{}, fmt.Errorf("no pending request %q", req.ID)
	case a.answered:
		return Answer{}, fmt.Errorf("request %q is no longer pending: it was already answered", req.ID)
	case a.ctx.Err() != nil:
		return Answer{}, fmt.Errorf("request %q is no longer pending: %s", req.ID, endedBy(a.ctx))
	}
	var ans Answer
	var err error
	if req.Digest != a.p.Digest {
		err = fmt.Errorf("the answer is for another version of request %q (digest mismatch)", req.ID)
	} else {
		ans, err = a.read(req)
	}
	if err != nil {
		// Under l.mu: the refusal is reported before a later answer can
		// be taken, and so before the request's audit line is written.
		a.refused(err.Error())
		return Answer{}, err
	}
	ans.Channel, ans.Who = LocalName, who
	a.answered = true
	a.answer <- ans
	l.changedLocked()
	return ans, nil
}

// read reads the answer req carries for a's prompt: an offered option for
// a permission request; for a question an action, with, for an accepted
// form, content that fits its schema.
func (a *localAsk) read(req localRequest) (Answer, error) {
	if !a.p.IsQuestion() {
		if req.Action != "" || req.Content != nil {
			return Answer{}, fmt.Errorf("%w: request %q is a permission request: it takes an option, not an action or content", ErrNoAnswer, req.ID)
		}
		opt, err := a.p.Choose(req.OptionID, req.Decision)
		if err != nil {
			return Answer{}, err
		}
		return Answer{OptionID: opt.ID}, nil
	}
	if req.OptionID != "" || req.Decision != "" {
		return Answer{}, fmt.Errorf("%w: request %q is a question: it takes an action (accept, decline or cancel), not an option", ErrNoAnswer, req.ID)
	}
	return a.p.ReplyTo(a.form, req.Action, req.Content)
}

// readLine reads one line of at most limit bytes (without its newline),
// or everything up to the end of input.
func readLine(r io.Reader, limit int) ([]byte, error) {
	br := bufio.NewReader(io.LimitReader(r, int64(limit)+1))
	line, err := br.ReadBytes('\n')
	switch {
	case len(line) > limit:
		return nil, fmt.Errorf("longer than %d bytes", limit)
	case err == io.EOF && len(line) > 0:
	case err != nil:
		return nil, err
	}
	return bytes.TrimSuffix(line, []byte("\n")), nil
}

// Pending is an open request of one of the user's running brokers.
type Pending struct {
	Prompt
	Broker int // the broker's pid
}

// ListPending asks every broker with a socket in dir for its pending
// requests. A socket nobody listens on is skipped. A broker that fails to
// answer is reported in the error, which joins every such failure; the
// list then still holds the others' requests.
func ListPending(dir string) ([]Pending, error) {
	all, err := listAll(dir)
	out := make([]Pending, len(all))
	for i, p := range all {
		out[i] = p.Pending
	}
	return out, err
}

// pendingAt is a pending request and the socket it came from.
type pendingAt struct {
	Pending
	socket string
}

func listAll(dir string) ([]pendingAt, error) {
	if err := checkPrivateDir(dir); err != nil {
		return nil, err
	}
	socks, err := sockets(dir)
	if err != nil {
		return nil, err
	}
	var out []pendingAt
	var errs []error
	for _, s := range socks {
		resp, err := callLocal(s.path, localRequest{Op: "list"})
		switch {
		case isDead(err):
			continue
		case err != nil:
			errs = append(errs, fmt.Errorf("broker %d: %w", s.pid, err))
			continue
		}
		for _, p := range resp.Pending {
			out = append(out, pendingAt{Pending{Prompt: p, Broker: resp.Broker}, s.path})
		}
	}
	return out, errors.Join(errs...)
}

// answerKinds maps the CLI's answers to option kinds, in order of
// preference.
var answerKinds = map[string][]string{
	"allow":  {"allow_once"},
	"always": {"allow_always"},
	"reject": {"reject_once", "reject_always"},
}

// AnswerPending answers the pending request id of one of the user's
// brokers: decision "allow" chooses its allow_once option, "always" its
// allow_always option and "reject" its reject_once option, else its
// reject_always one. The answer carries the request's digest as listed, so
// it cannot apply to anything else. It fails if no broker has the request
// pending or the broker refuses the answer (it was answered meanwhile, or
// withdrawn); the request is returned whenever it was found.
func AnswerPending(dir, id, decision string) (Pending, error) {
	if _, ok := answerKinds[decision]; !ok {
		return Pending{}, fmt.Errorf("unknown answer %q: use allow, always or reject", decision)
	}
	p, err := findPending(dir, id)
	if err != nil {
		return Pending{}, err
	}
	if p.IsQuestion() {
		return p.Pending, fmt.Errorf("request %q is a question, not a permission request: it is answered with accept, decline or cancel", id)
	}
	opt, err := DecisionOption(p.Prompt, decision)
	if err != nil {
		return p.Pending, err
	}
	return p.Pending, p.answer(localRequest{Op: "answer", ID: id, Digest: p.Digest, OptionID: opt.ID})
}

// DecisionOption returns the option of p that the CLI's answer decision
// ("allow", "always" or "reject", as AnswerPending reads them) chooses.
func DecisionOption(p Prompt, decision string) (Option, error) {
	kinds, ok := answerKinds[decision]
	if !ok {
		return Option{}, fmt.Errorf("unknown answer %q: use allow, always or reject", decision)
	}
	for _, kind := range kinds {
		if opt, err := p.Choose("", kind); err == nil {
			return opt, nil
		}
	}
	return Option{}, fmt.Errorf("request %q offers no option to %s", p.ID, decision)
}

// FindPending returns the pending request id of one of the user's brokers,
// for a caller that must read it before answering (a question's form).
func FindPending(dir, id string) (Pending, error) {
	p, err := findPending(dir, id)
	return p.Pending, err
}

// AnswerQuestion answers the question q, as FindPending returned it, with
// action "accept", "decline" or "cancel" and, for an accepted form, content
// (a JSON object the broker checks against the form's schema). Only the
// broker that listed q is asked (each listens on dir/PID.sock, PID the one
// it reports), not every one again. The answer carries q's digest: if the
// broker's request is no longer the one q shows, it is refused.
func AnswerQuestion(dir string, q Pending, action string, content json.RawMessage) error {
	if !q.IsQuestion() {
		return fmt.Errorf("request %q is a permission request, not a question", q.ID)
	}
	at := pendingAt{q, socketPath(dir, q.Broker)}
	resp, err := callLocal(at.socket, localRequest{Op: "list"})
	switch {
	case isDead(err):
		return fmt.Errorf("no pending request %q", q.ID)
	case err != nil:
		return fmt.Errorf("no pending request %q found: broker %d: %w", q.ID, q.Broker, err)
	}
	i := slices.IndexFunc(resp.Pending, func(p Prompt) bool { return p.ID == q.ID })
	switch {
	case i < 0:
		return fmt.Errorf("no pending request %q", q.ID)
	case resp.Broker != q.Broker || resp.Pending[i].Digest != q.Digest:
		return fmt.Errorf("request %q is no longer the question shown (it was replaced)", q.ID)
	}
	return at.answer(localRequest{Op: "answer", ID: q.ID, Digest: q.Digest, Action: action, Content: content})
}

// findPending finds the one pending request id among the user's brokers.
func findPending(dir, id string) (pendingAt, error) {
	all, listErr := listAll(dir)
	var found []pendingAt
	for _, p := range all {
		if p.ID == id {
			found = append(found, p)
		}
	}
	switch {
	case len(found) == 0 && listErr != nil:
		return pendingAt{}, fmt.Errorf("no pending request %q found: %w", id, listErr)
	case len(found) == 0:
		return pendingAt{}, fmt.Errorf("no pending request %q", id)
	case len(found) > 1:
		return pendingAt{}, fmt.Errorf("%d brokers have a pending request %q", len(found), id)
	}
	return found[0], nil
}

// answer sends req to the broker p came from.
func (p pendingAt) answer(req localRequest) error {
	resp, err := callLocal(p.socket, req)
	if err != nil {
		return fmt.Errorf("answering request %q: broker %d: %w", p.ID, p.Broker, err)
	}
	if !resp.OK {
		return fmt.Errorf("broker %d refused the answer: %s", p.Broker, resp.Error)
	}
	return nil
}

// callLocal sends one request to the broker listening on path and returns
// its response; a response with ok false is an error.
func callLocal(path string, req localRequest) (localResponse, error) {
	d := net.Dialer{Timeout: localIOTimeout}
	c, err := d.Dial("unix", path)
	if err != nil {
		return localResponse{}, err
	}
	conn := c.(*net.UnixConn)
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(localIOTimeout))
	// Only the user can make sockets in the directory; root can too, and
	// this says whose the broker is.
	uid, _, err := peercred.Of(conn)
	if err != nil {
		return localResponse{}, err
	}
	if uid != os.Geteuid() {
		return localResponse{}, fmt.Errorf("the socket is served by uid %d, not by you", uid)
	}
	line, _ := json.Marshal(req)
	// A broker that refuses the request says why without reading it, and
	// may have closed before the write: its response is the better error.
	_, writeErr := conn.Write(append(line, '\n'))
	line, err = readLine(conn, localMaxResponse)
	switch {
	case err != nil && writeErr != nil:
		return localResponse{}, writeErr
	case err != nil:
		return localResponse{}, fmt.Errorf("reading the response: %w", err)
	}
	var resp localResponse
	if err := json.Unmarshal(line, &resp); err != nil {
		return localResponse{}, fmt.Errorf("bad response: %w", err)
	}
	if !resp.OK && req.Op != "answer" {
		return localResponse{}, errors.New(resp.Error)
	}
	return resp, nil
}

// isDead says whether err means nobody listens on the socket.
func isDead(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ENOENT)
}

// deadSocket says whether nobody listens on the socket at path.
func deadSocket(path string) bool {
	c, err := net.DialTimeout("unix", path, localIOTimeout)
	if err == nil {
		c.Close()
		return false
	}
	return isDead(err)
}

type socketFile struct {
	path string
	pid  int
}

// socketPath is where the broker with this pid listens in dir.
func socketPath(dir string, pid int) string {
	return filepath.Join(dir, strconv.Itoa(pid)+".sock")
}

// sockets lists the brokers' sockets in dir: PID.sock, by pid.
func sockets(dir string) ([]socketFile, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []socketFile
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".sock")
		pid, err := strconv.Atoi(name)
		if !ok || err != nil || pid <= 0 || strconv.Itoa(pid) != name || e.Type() != fs.ModeSocket {
			continue
		}
		out = append(out, socketFile{filepath.Join(dir, e.Name()), pid})
	}
	return out, nil
}

// removeStale removes the sockets of brokers that are no longer running:
// their process is gone and nobody listens on the socket. (Both, so that a
// broker whose pid means something else here, in another pid namespace,
// keeps its socket.)
func removeStale(dir string) {
	socks, err := sockets(dir)
	if err != nil {
		return
	}
	for _, s := range socks {
		if s.pid == os.Getpid() {
			continue
		}
		if err := syscall.Kill(s.pid, 0); errors.Is(err, syscall.ESRCH) && deadSocket(s.path) {
			_ = os.Remove(s.path)
		}
	}
}
