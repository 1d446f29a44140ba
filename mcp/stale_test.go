//go:build linux

package mcp

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"
)

// deadHubDir lays out in parent what a broker killed with SIGKILL leaves
// of its hub: the directory, its lock file (which nobody holds any more)
// and its socket, on which nobody listens. Without lock, it is what a broker
// older than the lock file leaves.
func deadHubDir(t *testing.T, parent, name string, lock bool) string {
	t.Helper()
	dir := filepath.Join(parent, name)
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if lock {
		if err := os.WriteFile(filepath.Join(dir, hubLockName), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(dir, hubSocketName), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()
	return dir
}

// abandon dates a directory back past abandonedAfter, as if its broker had
// died an hour ago.
func abandon(t *testing.T, dir string) {
	t.Helper()
	then := time.Now().Add(-time.Hour)
	if err := os.Chtimes(dir, then, then); err != nil {
		t.Fatal(err)
	}
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// TestRemoveDeadHubsRemovesOnlyDeadHubsOfThisUser: of the directories in
// the temporary directory, only a dead hub's (its lock free and its socket
// there; or, from an older broker and unchanged for long, its socket
// refusing connections) is removed. A live hub's, one being set up, a
// link, another user's and anything not named as a hub's are left.
func TestRemoveDeadHubsRemovesOnlyDeadHubsOfThisUser(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)

	live := &Hub{Log: slog.New(slog.DiscardHandler)}
	if err := live.Listen(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { live.Close() })
	liveDir := filepath.Dir(live.Path())

	dead := deadHubDir(t, tmp, hubDirPrefix+"dead", true)
	olderDead := deadHubDir(t, tmp, hubDirPrefix+"older-dead", false)
	abandon(t, olderDead)

	olderLive := filepath.Join(tmp, hubDirPrefix+"older-live")
	if err := os.Mkdir(olderLive, 0o700); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", filepath.Join(olderLive, hubSocketName))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })

	// A hub being set up: made, not yet locked; locked, not yet listening.
	made := filepath.Join(tmp, hubDirPrefix+"made")
	if err := os.Mkdir(made, 0o700); err != nil {
		t.Fatal(err)
	}
	unlistened := filepath.Join(tmp, hubDirPrefix+"unlistened")
	if err := os.Mkdir(unlistened, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(unlistened, hubLockName), nil, 0o600); err != nil {
		t.Fatal(err)
	}

	// A link named as a hub's, to a dead hub's directory elsewhere: neither
	// is touched.
	elsewhere := t.TempDir()
	target := deadHubDir(t, elsewhere, "target", true)
	link := filepath.Join(tmp, hubDirPrefix+"link")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	// A dead hub's layout under another name.
	other := deadHubDir(t, tmp, "other-dir", true)

	kept := []string{liveDir, olderLive, made, unlistened, link, target, other}
	// Another user's dead hub: only root can make one to test with.
	if os.Geteuid() == 0 {
		theirs := deadHubDir(t, tmp, hubDirPrefix+"theirs", true)
		for _, p := range []string{theirs, filepath.Join(theirs, hubLockName), filepath.Join(theirs, hubSocketName)} {
			if err := os.Lchown(p, 65534, 65534); err != nil {
				t.Fatal(err)
			}
		}
		kept = append(kept, theirs)
	} else {
		t.Log("not root: another user's directory is not tested")
	}

	removed := RemoveDeadHubs(context.Background(), tmp)
	slices.Sort(removed)
	if want := []string{dead, olderDead}; !slices.Equal(removed, want) {
		t.Errorf("removed %q, want %q", removed, want)
	}
	for _, p := range []string{dead, olderDead} {
		if exists(p) {
			t.Errorf("a dead hub's directory %s is still there", p)
		}
	}
	for _, p := range kept {
		if !exists(p) {
			t.Errorf("%s was removed", p)
		}
	}
	if c, err := net.Dial("unix", live.Path()); err != nil {
		t.Errorf("the live hub no longer listens: %v", err)
	} else {
		c.Close()
	}

	// Once closed, a hub leaves nothing.
	live.Close()
	if exists(liveDir) {
		t.Errorf("a closed hub left %s", liveDir)
	}
}

// TestRemoveDeadHubsSparesHubsStartingMeanwhile: brokers start while
// another removes dead hubs' directories over and over; every hub that
// started is still there and listening.
func TestRemoveDeadHubsSparesHubsStartingMeanwhile(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	const hubs = 40
	done := make(chan struct{})
	var removed []string
	var cleaner sync.WaitGroup
	cleaner.Add(1)
	go func() {
		defer cleaner.Done()
		for {
			select {
			case <-done:
				return
			default:
				removed = append(removed, RemoveDeadHubs(context.Background(), tmp)...)
			}
		}
	}()
	started := make([]*Hub, hubs)
	var wg sync.WaitGroup
	for i := range started {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h := &Hub{Log: slog.New(slog.DiscardHandler)}
			if err := h.Listen(); err != nil {
				t.Errorf("hub %d: %v", i, err)
				return
			}
			started[i] = h
		}()
	}
	wg.Wait()
	close(done)
	cleaner.Wait()
	if len(removed) > 0 {
		t.Errorf("removed the directories of live hubs: %q", removed)
	}
	for i, h := range started {
		if h == nil {
			continue
		}
		c, err := net.Dial("unix", h.Path())
		if err != nil {
			t.Errorf("hub %d does not listen on %s: %v", i, h.Path(), err)
		} else {
			c.Close()
		}
		h.Close()
	}
	if entries, _ := os.ReadDir(tmp); len(entries) != 0 {
		t.Errorf("the closed hubs left %v", fmt.Sprint(entries))
	}
}

// TestRemoveDeadHubsSparesAFreshSocketWithoutLock: a directory without a
// lock file whose socket refuses connections, made moments ago, is left
// alone. It is what a hub being set up looks like to a broker that looked
// for the lock just before the hub made it, then found the socket bound
// but not yet listening; an older broker's hub looks so between bind and
// listen too.
func TestRemoveDeadHubsSparesAFreshSocketWithoutLock(t *testing.T) {
	tmp := t.TempDir()
	fresh := deadHubDir(t, tmp, hubDirPrefix+"binding", false)
	if removed := RemoveDeadHubs(context.Background(), tmp); len(removed) > 0 {
		t.Errorf("removed %q", removed)
	}
	if !exists(filepath.Join(fresh, hubSocketName)) {
		t.Errorf("the socket of a hub being set up was removed")
	}
}

// TestRemoveDeadHubsRemovesHalfMadeHubs: a broker killed while it set up
// its hub leaves a directory with no lock file, or no socket; once it has
// not changed for abandonedAfter it is removed, and not before.
func TestRemoveDeadHubsRemovesHalfMadeHubs(t *testing.T) {
	tmp := t.TempDir()
	halfMade := func(name string, files ...string) string {
		dir := filepath.Join(tmp, hubDirPrefix+name)
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if err := os.WriteFile(filepath.Join(dir, f), nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	// Killed after MkdirTemp; after making the lock file, before locking
	// and naming it; after locking it, before binding the socket.
	var fresh, old []string
	for name, files := range map[string][]string{"made": nil, "unnamed": {hubLockNewName}, "unlistened": {hubLockName}} {
		fresh = append(fresh, halfMade(name, files...))
		dir := halfMade("old-"+name, files...)
		abandon(t, dir)
		old = append(old, dir)
	}
	// One that holds something else besides: its hub's files go, the rest
	// and the directory stay.
	mixed := halfMade("mixed", hubLockName, "notes.txt")
	abandon(t, mixed)

	removed := RemoveDeadHubs(context.Background(), tmp)
	slices.Sort(removed)
	want := slices.Sorted(slices.Values(old))
	if !slices.Equal(removed, want) {
		t.Errorf("removed %q, want %q", removed, want)
	}
	for _, dir := range fresh {
		if !exists(dir) {
			t.Errorf("%s, made moments ago, was removed", dir)
		}
	}
	if !exists(filepath.Join(mixed, "notes.txt")) {
		t.Errorf("a file that is not a hub's was removed from %s", mixed)
	}
}

// TestRemoveDeadHubsNeverWaits: the agent runs as the broker's user and
// shares its temporary directory, so it can plant a FIFO where a hub's
// lock file goes, or make the temporary directory itself a FIFO; opening
// either for reading waits for a writer forever. The clean-up returns,
// leaving them.
func TestRemoveDeadHubsNeverWaits(t *testing.T) {
	tmp := t.TempDir()
	planted := deadHubDir(t, tmp, hubDirPrefix+"fifo", false)
	fifo := filepath.Join(planted, hubLockName)
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	abandon(t, planted)
	fifoTmp := filepath.Join(t.TempDir(), "tmp")
	if err := syscall.Mkfifo(fifoTmp, 0o600); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct{ tempDir, fifo string }{{tmp, fifo}, {fifoTmp, fifoTmp}} {
		done := make(chan []string, 1)
		go func() { done <- RemoveDeadHubs(context.Background(), c.tempDir) }()
		select {
		case removed := <-done:
			if len(removed) > 0 {
				t.Errorf("in %s: removed %q", c.tempDir, removed)
			}
		case <-time.After(waitTimeout):
			t.Errorf("in %s: the clean-up is still waiting on the FIFO %s after %v", c.tempDir, c.fifo, waitTimeout)
			// Let it go: a writer ends the reader's wait.
			if w, err := os.OpenFile(c.fifo, os.O_WRONLY, 0); err == nil {
				w.Close()
			}
			<-done
		}
	}
	if !exists(fifo) {
		t.Errorf("the planted FIFO was removed")
	}
}

// TestRemoveDeadHubsIsBounded: one clean-up examines at most so many
// entries of the temporary directory and so many hubs' directories, and
// none once its context has ended; the next broker's finds the rest.
func TestRemoveDeadHubsIsBounded(t *testing.T) {
	tmp := t.TempDir()
	const dead = 10
	for i := range dead {
		deadHubDir(t, tmp, fmt.Sprintf("%s%d", hubDirPrefix, i), true)
	}
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	if removed := removeDeadHubs(ended, tmp, dead, dead); len(removed) > 0 {
		t.Errorf("after its context ended, the clean-up removed %q", removed)
	}
	if removed := removeDeadHubs(context.Background(), tmp, 3, dead); len(removed) != 3 {
		t.Errorf("allowed 3 entries, it removed %q", removed)
	}
	if removed := removeDeadHubs(context.Background(), tmp, dead, 2); len(removed) != 2 {
		t.Errorf("allowed 2 directories, it removed %q", removed)
	}
	if removed := RemoveDeadHubs(context.Background(), tmp); len(removed) != dead-5 {
		t.Errorf("the next clean-up removed %q, want the %d left", removed, dead-5)
	}
}
