package rules

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/BurntSushi/toml"
)

// Store is the remembered-answers file, shared by every broker of the user:
// $XDG_STATE_HOME/acp-broker/remembered.toml. Writers hold an exclusive lock
// on a lock file beside it and replace the file atomically, so brokers
// writing at the same moment lose no update; readers never see half a file.
type Store struct{ Path string }

// StoreIn returns the store in a state directory.
func StoreIn(stateDir string) Store { return Store{Path: filepath.Join(stateDir, "remembered.toml")} }

type storeFile struct {
	Entry []Entry `toml:"entry"`
}

// Load reads every entry. A missing file is empty; a file that cannot be
// read or parsed is an error, and is never overwritten.
func (s Store) Load() ([]Entry, error) {
	data, err := os.ReadFile(s.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var f storeFile
	if _, err := toml.Decode(string(data), &f); err != nil {
		return nil, fmt.Errorf("%s: %w", s.Path, err)
	}
	for _, e := range f.Entry {
		if _, err := e.rule(s.Path); err != nil {
			return nil, fmt.Errorf("%s: %w", s.Path, err)
		}
	}
	return f.Entry, nil
}

// update runs change on the entries under the lock and writes the result.
func (s Store) update(change func([]Entry) []Entry) error {
	return WithLock(s.Path, func() error {
		entries, err := s.Load()
		if err != nil {
			return fmt.Errorf("not writing remembered answers over a file that cannot be read: %w", err)
		}
		var buf bytes.Buffer
		buf.WriteString("# Answers you gave an agent \"always\", kept by acp-broker.\n# List them with 'acp-broker remembered list'; remove with 'acp-broker remembered revoke ID'.\n")
		if err := toml.NewEncoder(&buf).Encode(storeFile{Entry: change(entries)}); err != nil {
			return err
		}
		return WriteFileAtomic(s.Path, buf.Bytes())
	})
}

// FileStamp identifies one version of a file cheaply: a changed file has a
// different modification time, size or inode (an editor's save-by-rename).
// Brokers compare stamps to notice that a shared file changed.
type FileStamp struct {
	Path    string
	ModTime time.Time
	Size    int64
	Ino     uint64
	Exists  bool
}

// StampOf returns the stamp of the file at path now.
func StampOf(path string) FileStamp {
	fi, err := os.Stat(path)
	if err != nil {
		return FileStamp{Path: path}
	}
	s := FileStamp{Path: path, ModTime: fi.ModTime(), Size: fi.Size(), Exists: true}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		s.Ino = st.Ino
	}
	return s
}

// WithLock runs fn holding an exclusive lock on path's lock file (path plus
// ".lock"), so that brokers reading, changing and replacing a shared state
// file one after another lose no update.
func WithLock(path string, fn func() error) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	lock, err := os.OpenFile(path+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("locking %s: %w", path, err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	return fn()
}

// entryID names an entry by what it decides, so the same answer learned by
// two brokers is one entry.
func entryID(e Entry) string {
	sum := sha256.Sum256([]byte(e.key()))
	return "r" + hex.EncodeToString(sum[:4])
}

// Add remembers entries, merging duplicates, and returns them with ids.
func (s Store) Add(entries ...Entry) ([]Entry, error) {
	for i := range entries {
		entries[i].ID = entryID(entries[i])
	}
	err := s.update(func(have []Entry) []Entry {
		for _, e := range entries {
			if !slices.ContainsFunc(have, func(h Entry) bool { return h.ID == e.ID }) {
				have = append(have, e)
			}
		}
		return have
	})
	return entries, err
}

// Revoke removes the entries with these ids and reports how many it removed.
func (s Store) Revoke(ids ...string) (int, error) {
	n := 0
	err := s.update(func(have []Entry) []Entry {
		kept := have[:0]
		for _, e := range have {
			if slices.Contains(ids, e.ID) {
				n++
				continue
			}
			kept = append(kept, e)
		}
		return kept
	})
	return n, err
}

// Clear removes every entry, or only those of one project.
func (s Store) Clear(project string) (int, error) {
	n := 0
	err := s.update(func(have []Entry) []Entry {
		kept := have[:0]
		for _, e := range have {
			if project == "" || (e.Scope == "project" && filepath.Clean(e.Project) == filepath.Clean(project)) {
				n++
				continue
			}
			kept = append(kept, e)
		}
		return kept
	})
	return n, err
}

// SessionRule compiles an entry remembered for one session only.
func SessionRule(e Entry) (*Rule, error) {
	e.ID = entryID(e)
	return e.rule("")
}

// rememberedFile loads the entries that apply in a project as a pseudo rule
// file of the remembered layer. A store that cannot be read gives a warning,
// never an error: the written rules still apply, and nothing is allowed that
// they would not allow.
func rememberedFile(stateDir, projectDir string) (*File, []string) {
	store := StoreIn(stateDir)
	entries, err := store.Load()
	if err != nil {
		return nil, []string{fmt.Sprintf("cannot read remembered answers (%v): only the written rules apply, and the file is left as it is", err)}
	}
	f := &File{Path: store.Path, Layer: Remembered, Trusted: true}
	for _, e := range entries {
		if !e.appliesTo(projectDir) {
			continue
		}
		r, _ := e.rule(store.Path) // Load checked every entry
		f.Rules = append(f.Rules, r)
	}
	if len(f.Rules) == 0 {
		return nil, nil
	}
	return f, nil
}
