// Package mcp stands the broker between an agent and the stdio MCP servers
// the editor gives it. The broker rewrites each server's entry in the
// session set-up so that the agent starts `acp-broker mcp-proxy` instead;
// the proxy relays the server's traffic byte for byte, reports the tools it
// lists, and holds each tools/call until the broker has decided it. Proxy
// and broker talk over a private Unix socket (the Hub), and the tools'
// annotations are pinned in a catalog the first time they are seen.
//
// The package reads and relays; it decides nothing. Decisions belong to the
// Governor the broker provides.
package mcp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sourcegraph/jsonrpc2"

	"github.com/acp-broker/acp-broker/internal/peercred"
	"github.com/acp-broker/acp-broker/jsonrpc"
	"github.com/acp-broker/acp-broker/rules"
)

// Call is one tools/call a proxy holds.
type Call struct {
	Session string // the ACP session whose agent made the call; "" if not known yet
	Cwd     string // that session's working directory
	Server  string // the server's name in the session set-up
	Tool    string
	// Arguments are the call's arguments: the values the agent sent, which
	// the private channel may have re-encoded (spacing, escapes).
	Arguments json.RawMessage
}

// Verdicts a Governor returns.
const (
	Allow = "allow"
	Deny  = "deny"
	Ask   = "ask" // only from Decide: the call must go to a human (Governor.Ask)
)

// Verdict is the answer to a held call. Message tells the agent why a call
// was refused.
type Verdict struct {
	Decision string `json:"decision"`
	Message  string `json:"message,omitempty"`
}

// Governor decides the calls the proxies hold, and keeps the record.
type Governor interface {
	// Decide decides a call from the rules and what the agent already asked
	// in ACP, without waiting for anyone: Allow, Deny or Ask.
	Decide(c Call) Verdict
	// Ask puts a call the rules leave open to a human and waits for the
	// answer (Allow or Deny). ctx ends if the agent cancels the call.
	Ask(ctx context.Context, c Call) Verdict
	// Rewrote records that a session set-up's stdio servers were proxied.
	Rewrote(method, cwd string, proxied, unchanged []string)
	// Listed records what a server's listing changed in the catalog.
	Listed(session string, changes []Change)
}

// Hub is the broker's end of the private channel: a Unix socket in a fresh
// 0700 directory that only the broker's user can reach, where each proxy
// proves with its entry's random token which server it speaks for.
//
// The directory (hubDirPrefix + random, in the temporary directory) also
// holds a lock file, which the hub holds locked (flock) from before the
// file has its name, and so before the socket exists, until after the
// directory is gone: a broker killed with SIGKILL cannot remove its
// directory, and the lock, released by the kernel with the process, tells
// the next broker that it may (RemoveDeadHubs).
type Hub struct {
	// Exe is the broker's executable, which the agent starts as the proxy.
	Exe     string
	Catalog *Catalog
	Log     *slog.Logger
	// Policy returns the rules in force for a working directory, for the
	// proxy settings.
	Policy   func(cwd string) (*rules.Policy, error)
	Governor Governor

	dir, path string
	ln        *net.UnixListener
	lock      *os.File // the directory's lock file, held locked while the hub lives
	uid       int      // the only user whose processes are served

	mu     sync.Mutex
	closed bool
	links  map[string]*link // by token
	conns  map[*jsonrpc2.Conn]struct{}
}

// link is one rewritten server entry, known by its token.
type link struct {
	server string
	cwd    string
	// session is set once the agent has answered the set-up request.
	session string
	// connected is set while a proxy holds the token: a second connection
	// with the same token is refused, so a process that read the token
	// cannot speak for a running proxy.
	connected bool
	// retired is set when the session is set up anew without this entry
	// (session/load, session/resume): its token is forgotten, and a proxy
	// still holding it decides nothing and reports nothing, since the
	// server it runs is no longer one the session's set-up named.
	retired bool
}

// Listen opens the hub's socket, unless it is open already. Rewrite calls
// it when a session set-up first names a server to proxy, so a broker whose
// sessions have no stdio MCP server never opens it.
func (h *Hub) Listen() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.closed:
		return errors.New("the MCP proxies' socket was closed")
	case h.path != "":
		return nil // open already
	}
	dir, err := os.MkdirTemp("", hubDirPrefix)
	if err != nil {
		return err
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		os.RemoveAll(dir)
		return err
	}
	// The lock file is locked before it gets its name: a broker cleaning up
	// (RemoveDeadHubs) never finds it free while this hub lives, nor holds
	// it when this hub would take it.
	unnamed := filepath.Join(dir, hubLockNewName)
	lock, err := os.OpenFile(unnamed, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		os.RemoveAll(dir)
		return err
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		lock.Close()
		os.RemoveAll(dir)
		return fmt.Errorf("locking the MCP proxies' socket directory: %w", err)
	}
	if err := os.Rename(unnamed, filepath.Join(dir, hubLockName)); err != nil {
		lock.Close()
		os.RemoveAll(dir)
		return err
	}
	path := filepath.Join(dir, hubSocketName)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		os.RemoveAll(dir)
		lock.Close()
		return err
	}
	h.dir, h.path, h.ln, h.lock, h.uid = dir, path, ln, lock, os.Getuid()
	h.links = map[string]*link{}
	h.conns = map[*jsonrpc2.Conn]struct{}{}
	go h.serve()
	return nil
}

// Path is the socket's path, once Listen has opened it.
func (h *Hub) Path() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.path
}

// Close stops serving and removes the socket's directory. Proxies still
// running then refuse every call: nobody is left to decide it.
func (h *Hub) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	if h.ln == nil {
		return nil
	}
	err := h.ln.Close()
	for c := range h.conns {
		c.Close()
	}
	os.RemoveAll(h.dir)
	h.lock.Close() // only now: the directory is gone
	return err
}

// The names of a hub's directory (a prefix, in the temporary directory) and
// of the files in it.
const (
	hubDirPrefix   = "acp-broker-mcp-"
	hubLockName    = "lock"
	hubLockNewName = "lock.new" // the lock file until it is locked
	hubSocketName  = "s"
)

// The bounds of one RemoveDeadHubs: the temporary directory is shared by
// every program of the user, the agent included, which may fill it.
const (
	deadHubsMaxEntries = 10000 // entries of the temporary directory read
	deadHubsMaxDirs    = 100   // hubs' directories examined
	deadHubsMaxTime    = 10 * time.Second
	// abandonedAfter is how long a hub's directory must have stayed
	// unchanged for a missing lock file or socket to mean that its broker
	// died setting it up: a hub makes both moments after its directory,
	// and each changes the directory.
	abandonedAfter = 5 * time.Minute
)

// RemoveDeadHubs removes from tempDir (the temporary directory the hubs of
// this user's brokers were made in) the directories of hubs whose broker
// is no longer running, and returns them. A directory is removed only if
// it is a directory (not a link) owned by this user, and its hub is dead:
//
//   - its lock file is a regular file that is not locked (a live hub holds
//     it locked from before it has that name), and the socket is there or
//     the directory has not changed for abandonedAfter (a broker killed
//     before it listened);
//   - or it has no lock file, has not changed for abandonedAfter, and has
//     no socket (a broker killed before it made its lock) or, as a broker
//     older than the lock file leaves it, a socket that refuses
//     connections (nobody listens on it).
//
// A directory being set up changed moments ago, so it is left alone. Only
// the hub's own files go, then the directory if that left it empty; the
// lock is held meanwhile, so that two brokers starting at once do not both
// remove them. Nothing is opened in a way that could block: a FIFO or a
// link where the lock file should be makes the directory no hub's.
//
// One call reads at most deadHubsMaxEntries entries of tempDir, examines
// at most deadHubsMaxDirs hubs' directories, and stops after
// deadHubsMaxTime or when ctx ends, whichever comes first: what is left
// is for the next broker.
func RemoveDeadHubs(ctx context.Context, tempDir string) []string {
	ctx, cancel := context.WithTimeout(ctx, deadHubsMaxTime)
	defer cancel()
	return removeDeadHubs(ctx, tempDir, deadHubsMaxEntries, deadHubsMaxDirs)
}

// removeDeadHubs is RemoveDeadHubs with its bounds on entries and
// directories given.
func removeDeadHubs(ctx context.Context, tempDir string, maxEntries, maxDirs int) []string {
	// O_DIRECTORY: a temporary directory that is no directory (a FIFO)
	// fails at once instead of blocking the open.
	fd, err := syscall.Open(tempDir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	d := os.NewFile(uintptr(fd), tempDir)
	defer d.Close()
	var removed []string
	read, dirs := 0, 0
	for read < maxEntries && dirs < maxDirs && ctx.Err() == nil {
		entries, err := d.ReadDir(min(256, maxEntries-read))
		read += len(entries)
		for _, e := range entries {
			if dirs == maxDirs || ctx.Err() != nil {
				break
			}
			if !strings.HasPrefix(e.Name(), hubDirPrefix) || !e.IsDir() {
				continue
			}
			dirs++
			dir := filepath.Join(tempDir, e.Name())
			if removeIfDead(ctx, dir) {
				removed = append(removed, dir)
			}
		}
		if err != nil {
			break // io.EOF: every entry was read
		}
	}
	return removed
}

// removeIfDead removes a hub's directory if it is this user's and its hub
// is dead (see RemoveDeadHubs), and reports whether it did.
func removeIfDead(ctx context.Context, dir string) bool {
	fi, err := os.Lstat(dir)
	if err != nil || !fi.IsDir() {
		return false
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); !ok || int(st.Uid) != os.Geteuid() {
		return false
	}
	abandoned := time.Since(fi.ModTime()) > abandonedAfter
	lockPath, socket := filepath.Join(dir, hubLockName), filepath.Join(dir, hubSocketName)
	lock, err := openLock(lockPath)
	if errors.Is(err, fs.ErrNotExist) {
		if !abandoned {
			return false // a hub being set up
		}
		sfi, err := os.Lstat(socket)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			// A broker killed before it made its lock file.
		case err != nil || sfi.Mode().Type() != fs.ModeSocket:
			return false // not a hub's
		case !refuses(ctx, socket):
			return false // an older broker's live hub, or no clear answer
		}
		// A hub makes its lock file before its socket: one that has it
		// now is being set up after all, whatever the clock said.
		if _, err := os.Lstat(lockPath); !errors.Is(err, fs.ErrNotExist) {
			return false
		}
		return removeHubDir(dir)
	}
	if err != nil {
		return false // not a hub's lock file
	}
	defer syscall.Close(lock)
	if syscall.Flock(lock, syscall.LOCK_EX|syscall.LOCK_NB) != nil {
		return false // held: the hub lives
	}
	if sfi, err := os.Lstat(socket); (err != nil || sfi.Mode().Type() != fs.ModeSocket) && !abandoned {
		return false // a directory already removed, or not a hub's yet
	}
	return removeHubDir(dir)
}

// openLock opens a hub's lock file for flock, only if it is a regular
// file: it follows no link and does not wait for a FIFO's writer (the
// agent, running as the same user, can plant either).
func openLock(path string) (int, error) {
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil || st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		syscall.Close(fd)
		return -1, errors.New("not a regular file")
	}
	return fd, nil
}

// refuses reports whether a Unix socket refuses connections: nobody
// listens on it.
func refuses(ctx context.Context, socket string) bool {
	d := net.Dialer{Timeout: time.Second}
	conn, err := d.DialContext(ctx, "unix", socket)
	if err == nil {
		conn.Close()
		return false
	}
	return errors.Is(err, syscall.ECONNREFUSED)
}

// removeHubDir removes a dead hub's files, the lock file last, and then
// its directory, which stays if it holds anything else.
func removeHubDir(dir string) bool {
	for _, name := range []string{hubSocketName, hubLockNewName, hubLockName} {
		os.Remove(filepath.Join(dir, name))
	}
	return os.Remove(dir) == nil
}

func (h *Hub) serve() {
	for {
		conn, err := h.ln.AcceptUnix()
		if err != nil {
			return
		}
		uid, pid, err := peercred.Of(conn)
		if err != nil || uid != h.uid {
			h.Log.Warn("refused a connection to the MCP proxy socket from another user", "uid", uid, "pid", pid, "err", err)
			conn.Close()
			continue
		}
		lc := &linkConn{hub: h, pid: pid, calls: map[string]context.CancelFunc{}}
		c := jsonrpc2.NewConn(context.Background(), jsonrpc2.NewPlainObjectStream(conn), jsonrpc2.AsyncHandler(lc))
		h.mu.Lock()
		h.conns[c] = struct{}{}
		h.mu.Unlock()
		go func() {
			<-c.DisconnectNotify()
			lc.closed()
			h.mu.Lock()
			delete(h.conns, c)
			h.mu.Unlock()
		}()
	}
}

// Methods of the private channel, proxy to hub.
const (
	methodHello  = "hello"  // {token} → {server}
	methodTools  = "tools"  // {tools: [...]}: one tools/list result's tools
	methodCall   = "call"   // {id, name, arguments} → Verdict, at once
	methodAsk    = "ask"    // {id, name, arguments} → Verdict, when a human has answered
	methodCancel = "cancel" // {id}: the agent cancelled a call being asked about
	// methodChanged says the server sent notifications/tools/list_changed.
	methodChanged = "changed"
)

type helloParams struct {
	Token string `json:"token"`
}

type helloResult struct {
	Server string `json:"server"`
}

type toolsParams struct {
	Tools []Tool `json:"tools"`
}

type callParams struct {
	ID        json.RawMessage `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

type cancelParams struct {
	ID json.RawMessage `json:"id"`
}

// linkConn is one proxy's connection. Until it has said hello with a valid
// token it may do nothing else.
type linkConn struct {
	hub *Hub
	pid int

	mu    sync.Mutex
	link  *link
	calls map[string]context.CancelFunc
}

// Handle answers one request; a connection that fails to introduce itself
// is answered, then closed: nothing more is taken from it.
func (lc *linkConn) Handle(ctx context.Context, conn *jsonrpc2.Conn, req *jsonrpc2.Request) {
	result, err := lc.handle(ctx, req)
	refused := errors.Is(err, errRefused)
	if !req.Notif {
		if err != nil {
			_ = conn.ReplyWithError(ctx, req.ID, &jsonrpc2.Error{Code: jsonrpc2.CodeInvalidRequest, Message: err.Error()})
		} else {
			_ = conn.Reply(ctx, req.ID, result)
		}
	}
	if refused {
		conn.Close()
	}
}

// errRefused marks the errors that end a connection.
var errRefused = errors.New("refused")

func (lc *linkConn) handle(ctx context.Context, req *jsonrpc2.Request) (any, error) {
	h := lc.hub
	if req.Method == methodHello {
		var p helloParams
		if req.Params == nil || json.Unmarshal(*req.Params, &p) != nil {
			return nil, fmt.Errorf("%w: bad hello", errRefused)
		}
		l, err := lc.introduce(p.Token)
		if err != nil {
			h.Log.Warn("refused an MCP proxy's hello", "pid", lc.pid, "err", err)
			return nil, fmt.Errorf("%w: %v", errRefused, err)
		}
		return helloResult{Server: l.server}, nil
	}
	lc.mu.Lock()
	l := lc.link
	lc.mu.Unlock()
	if l == nil {
		return nil, fmt.Errorf("%w: say hello with your token first", errRefused)
	}
	h.mu.Lock()
	retired := l.retired
	h.mu.Unlock()
	if retired {
		if req.Method == methodCall || req.Method == methodAsk {
			return Verdict{Decision: Deny, Message: "acp-broker refused this call: its session was set up anew without this server, so this proxy no longer speaks for it"}, nil
		}
		return nil, fmt.Errorf("the session was set up anew without server %q", l.server)
	}
	switch req.Method {
	case methodTools:
		var p toolsParams
		if req.Params == nil || json.Unmarshal(*req.Params, &p) != nil {
			return nil, errors.New("bad tools report")
		}
		session := h.session(l)
		changes, err := h.Catalog.Observe(l.server, session, p.Tools)
		if err != nil {
			h.Log.Error("cannot record an MCP server's tools; none of them is relaxed", "server", l.server, "err", err)
		}
		if len(changes) > 0 {
			h.Governor.Listed(session, changes)
		}
		return struct{}{}, nil
	case methodChanged:
		h.Catalog.Stale(l.server, h.session(l))
		h.Governor.Listed(h.session(l), []Change{{Server: l.server, Stale: true}})
		return struct{}{}, nil
	case methodCall, methodAsk:
		var p callParams
		if req.Params == nil || json.Unmarshal(*req.Params, &p) != nil {
			return nil, errors.New("bad call")
		}
		h.mu.Lock()
		c := Call{Session: l.session, Cwd: l.cwd, Server: l.server, Tool: p.Name, Arguments: p.Arguments}
		h.mu.Unlock()
		if req.Method == methodCall {
			return h.Governor.Decide(c), nil
		}
		ctx, cancel := context.WithCancel(ctx)
		key := jsonrpc.IDKey(p.ID)
		lc.mu.Lock()
		lc.calls[key] = cancel
		lc.mu.Unlock()
		defer func() {
			lc.mu.Lock()
			delete(lc.calls, key)
			lc.mu.Unlock()
			cancel()
		}()
		return h.Governor.Ask(ctx, c), nil
	case methodCancel:
		var p cancelParams
		if req.Params != nil && json.Unmarshal(*req.Params, &p) == nil {
			lc.mu.Lock()
			if cancel, ok := lc.calls[jsonrpc.IDKey(p.ID)]; ok {
				cancel()
			}
			lc.mu.Unlock()
		}
		return nil, nil
	}
	return nil, fmt.Errorf("unknown method %s", req.Method)
}

// introduce binds the connection to the entry whose token it gave.
func (lc *linkConn) introduce(token string) (*link, error) {
	h := lc.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	lc.mu.Lock()
	defer lc.mu.Unlock()
	if lc.link != nil {
		return nil, errors.New("this connection has already said hello")
	}
	l, ok := h.links[token]
	switch {
	case !ok:
		return nil, errors.New("unknown token")
	case l.connected:
		return nil, fmt.Errorf("the token of server %q is in use by a running proxy", l.server)
	}
	l.connected = true
	lc.link = l
	return l, nil
}

// closed frees the connection's token for a restarted proxy and stops its
// pending asks.
func (lc *linkConn) closed() {
	lc.mu.Lock()
	for _, cancel := range lc.calls {
		cancel()
	}
	l := lc.link
	lc.mu.Unlock()
	if l != nil {
		lc.hub.mu.Lock()
		l.connected = false
		lc.hub.mu.Unlock()
	}
}

func (h *Hub) session(l *link) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return l.session
}

func newToken() string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("mcp: no randomness: " + err.Error()) // crypto/rand does not fail on supported systems
	}
	return hex.EncodeToString(b[:])
}
