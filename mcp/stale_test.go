//go:build linux

package mcp

import (
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
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

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// TestRemoveDeadHubsRemovesOnlyDeadHubsOfThisUser: of the directories in
// the temporary directory, only a dead hub's (its lock free and its socket
// there; or, from an older broker, its socket refusing connections) is
// removed. A live hub's, one being set up, a link, another user's and
// anything not named as a hub's are left.
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

	removed := RemoveDeadHubs(tmp)
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
				removed = append(removed, RemoveDeadHubs(tmp)...)
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
