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
	"syscall"
	"time"

	"github.com/BurntSushi/toml"
)

// ProjectFileName is the project layer's file, in the session's directory
// and the ones above it (see ProjectFiles).
const ProjectFileName = ".acp-broker.toml"

// Locations are where the broker keeps its files.
type Locations struct {
	Managed  string // /etc/acp-broker/config.toml
	User     string // $XDG_CONFIG_HOME/acp-broker/config.toml
	StateDir string // $XDG_STATE_HOME/acp-broker: trust, remembered answers, audit
	Home     string
}

// DefaultLocations follows the XDG base directory conventions.
func DefaultLocations() (Locations, error) {
	home, err := os.UserHomeDir()
	if err != nil {
		return Locations{}, fmt.Errorf("finding the home directory: %w", err)
	}
	config := os.Getenv("XDG_CONFIG_HOME")
	if !filepath.IsAbs(config) {
		config = filepath.Join(home, ".config")
	}
	state := os.Getenv("XDG_STATE_HOME")
	if !filepath.IsAbs(state) {
		state = filepath.Join(home, ".local", "state")
	}
	return Locations{
		Managed:  "/etc/acp-broker/config.toml",
		User:     filepath.Join(config, "acp-broker", "config.toml"),
		StateDir: filepath.Join(state, "acp-broker"),
		Home:     home,
	}, nil
}

// brokerFiles are the locations an agent must never write or read: the
// broker's config directories, its state, and extra config, audit, trace
// and log files.
func (l Locations) brokerFiles(extra []string) []string {
	files := []string{filepath.Dir(l.Managed), filepath.Dir(l.User), l.StateDir}
	for _, f := range extra {
		if abs, err := filepath.Abs(f); err == nil {
			files = append(files, abs)
		}
	}
	return files
}

// LoadOptions select the layers to load.
type LoadOptions struct {
	Locations
	Extra      []string // --config files, part of the user layer
	ProjectDir string   // the session's working directory, where ProjectFiles looks; "" for none
	// LastProject are the project files that were in force before: when
	// one no longer reads, its deny and ask rules stay (and nothing else
	// of it).
	LastProject []*File
	// Protect lists more of the broker's own files (its audit log, trace and
	// log file) that agents must not touch.
	Protect []string
}

// Load reads every layer and returns the policy and any warnings. A managed
// or user file that does not parse, a managed file that anyone but root
// could have written, or a --config file that does not exist stops with an
// error: nothing falls back to a looser policy. A project file never
// stops Load (it comes with the repository, which must not be able to deny
// the user the agent): a problem with it is the policy's ProjectError, and
// every request is then asked.
func Load(opts LoadOptions) (*Policy, []string, error) {
	var files []*File
	var warnings []string
	if opts.Managed != "" {
		f, err := loadManaged(opts.Managed)
		if err != nil {
			return nil, nil, err
		}
		if f != nil {
			files = append(files, f)
		}
	}
	if opts.User != "" {
		f, warn, err := loadOptional(opts.User, User)
		if err != nil {
			return nil, nil, err
		}
		warnings = append(warnings, warn...)
		if f != nil {
			files = append(files, f)
		}
	}
	for _, path := range opts.Extra {
		f, err := ParseFile(path, User)
		if err != nil {
			return nil, nil, err
		}
		warnings = append(warnings, writableWarning(path)...)
		files = append(files, f)
	}
	var project projectLayer
	if opts.ProjectDir != "" {
		project = loadProject(opts)
		warnings = append(warnings, project.warnings...)
		files = append(files, project.files...)
	}
	if opts.StateDir != "" {
		f, warn := rememberedFile(opts.StateDir, opts.ProjectDir)
		warnings = append(warnings, warn...)
		if f != nil {
			files = append(files, f)
		}
	}
	p := NewPolicy(files, opts.Home, opts.brokerFiles(append(opts.Extra, opts.Protect...)))
	p.ProjectError, p.ProjectNotes = project.problem, project.notes
	return p, warnings, nil
}

func hasLoosening(f *File) bool {
	for _, r := range f.Rules {
		if r.Decision == Allow {
			return true
		}
	}
	return len(f.MCP) > 0 || f.Mode != "" || f.Remember != ""
}

func loadManaged(path string) (*File, error) {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid != 0 {
		return nil, &ConfigError{File: path, Msg: fmt.Sprintf("refusing the managed config: it is owned by uid %d, not root", st.Uid),
			Hint: "the managed layer must be owned by root: sudo chown root " + path}
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return nil, &ConfigError{File: path, Msg: fmt.Sprintf("refusing the managed config: it is writable by group or others (mode %04o)", fi.Mode().Perm()),
			Hint: "sudo chmod go-w " + path}
	}
	return ParseFile(path, Managed)
}

func loadOptional(path string, layer Layer) (*File, []string, error) {
	f, err := ParseFile(path, layer)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	return f, writableWarning(path), nil
}

func writableWarning(path string) []string {
	if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o022 != 0 {
		return []string{fmt.Sprintf("%s is writable by group or others (mode %04o): anyone who can write it decides what your agents may do (chmod go-w %s)", path, fi.Mode().Perm(), path)}
	}
	return nil
}

// trustStore is the list of project files the user trusts, by path and
// content digest.
type trustStore struct {
	Trusted []trustEntry `toml:"trusted"`
}

type trustEntry struct {
	Path      string    `toml:"path"`
	SHA256    string    `toml:"sha256"`
	TrustedAt time.Time `toml:"trusted_at"`
}

func trustFile(stateDir string) string { return filepath.Join(stateDir, "trust.toml") }

func readTrust(stateDir string) (*trustStore, error) {
	var ts trustStore
	data, err := os.ReadFile(trustFile(stateDir))
	if errors.Is(err, fs.ErrNotExist) {
		return &ts, nil
	}
	if err != nil {
		return nil, err
	}
	if _, err := toml.Decode(string(data), &ts); err != nil {
		return nil, fmt.Errorf("%s: %w", trustFile(stateDir), err)
	}
	return &ts, nil
}

func digest(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// isTrusted reports whether the project file at path, read as data, is
// trusted with that content, and whether it was trusted with other content
// before. The digest is of the bytes that were parsed, never of a second
// read that a swap of the file could make differ.
func isTrusted(stateDir, path string, data []byte) (trusted, changed bool, err error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return false, false, err
	}
	sum := digest(data)
	ts, err := readTrust(stateDir)
	if err != nil {
		return false, false, err
	}
	for _, e := range ts.Trusted {
		if e.Path == abs {
			if e.SHA256 == sum {
				return true, false, nil
			}
			changed = true
		}
	}
	return false, changed, nil
}

// Trust records the project file in dir as trusted with its current
// content. It returns the file's path and digest.
func Trust(stateDir, dir string) (string, string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", "", err
	}
	path, data, exists, err := readProjectFile(dir)
	if !exists {
		return "", "", &fs.PathError{Op: "open", Path: path, Err: fs.ErrNotExist}
	}
	if err != nil {
		return "", "", fmt.Errorf("%s: not read: %w", path, err)
	}
	if _, err := Parse(path, Project, string(data)); err != nil {
		return "", "", err
	}
	sum := digest(data)
	ts, err := readTrust(stateDir)
	if err != nil {
		return "", "", err
	}
	kept := ts.Trusted[:0]
	for _, e := range ts.Trusted {
		if e.Path != path {
			kept = append(kept, e)
		}
	}
	ts.Trusted = append(kept, trustEntry{Path: path, SHA256: sum, TrustedAt: time.Now().UTC().Truncate(time.Second)})
	var buf bytes.Buffer
	buf.WriteString("# Project rule files acp-broker trusts, by content. Written by 'acp-broker trust'.\n")
	if err := toml.NewEncoder(&buf).Encode(ts); err != nil {
		return "", "", err
	}
	if err := WriteFileAtomic(trustFile(stateDir), buf.Bytes()); err != nil {
		return "", "", err
	}
	return path, sum, nil
}

// WriteFileAtomic replaces a file with data, mode 0600, in its own 0700
// directory: a temporary file is written, synced and renamed over the old
// one, so a reader sees the old content or the new, never a mix.
func WriteFileAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
