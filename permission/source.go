package permission

import (
	"log/slog"
	"path/filepath"
	"slices"
	"sync"

	"github.com/acp-broker/acp-broker/rules"
)

// RuleSource loads the rule layers for each project directory and reloads
// them when a file changes, so edits take effect for the next request
// without restarting the agent. A file that becomes invalid keeps the
// previous rules in force and logs the error.
type RuleSource struct {
	opts rules.LoadOptions // ProjectDir is set per request
	log  *slog.Logger

	mu    sync.Mutex
	cache map[string]*loaded
}

type loaded struct {
	policy   *rules.Policy
	stamps   []rules.FileStamp
	warnings []string
}

// NewRuleSource loads every layer once for startDir and fails on any error:
// a broken or unreadable config at start-up must stop the broker, never fall
// back to a looser policy.
func NewRuleSource(opts rules.LoadOptions, startDir string, log *slog.Logger) (*RuleSource, []string, error) {
	s := &RuleSource{opts: opts, log: log, cache: map[string]*loaded{}}
	l, err := s.load(startDir)
	if err != nil {
		return nil, nil, err
	}
	s.cache[startDir] = l
	return s, l.warnings, nil
}

// files are the files whose change means reloading: every layer, the trust
// store and the remembered answers (which other brokers may have written).
func (s *RuleSource) files(projectDir string) []string {
	files := []string{s.opts.Managed, s.opts.User, filepath.Join(s.opts.StateDir, "trust.toml"), rules.StoreIn(s.opts.StateDir).Path}
	files = append(files, s.opts.Extra...)
	if projectDir != "" {
		files = append(files, filepath.Join(projectDir, rules.ProjectFileName))
	}
	return files
}

func (s *RuleSource) stamps(projectDir string) []rules.FileStamp {
	var out []rules.FileStamp
	for _, f := range s.files(projectDir) {
		if f != "" {
			out = append(out, rules.StampOf(f))
		}
	}
	return out
}

func (s *RuleSource) load(projectDir string) (*loaded, error) {
	stamps := s.stamps(projectDir)
	opts := s.opts
	opts.ProjectDir = projectDir
	policy, warnings, err := rules.Load(opts)
	if err != nil {
		return nil, err
	}
	return &loaded{policy: policy, stamps: stamps, warnings: warnings}, nil
}

// Policy returns the rules in force for a session's directory, reloading
// them if any file changed since they were read.
func (s *RuleSource) Policy(projectDir string) (*rules.Policy, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cached, ok := s.cache[projectDir]
	current := s.stamps(projectDir)
	if ok && slices.Equal(cached.stamps, current) {
		return cached.policy, nil
	}
	l, err := s.load(projectDir)
	if err != nil {
		if !ok {
			return nil, err
		}
		// Keep the rules that were in force; note the new stamps so the error
		// is logged once per change, not once per request.
		s.log.Error("a rule file is invalid; the previous rules stay in force", "err", err)
		cached.stamps = current
		return cached.policy, nil
	}
	if ok {
		s.log.Info("rules reloaded", "dir", projectDir)
	}
	for _, w := range l.warnings {
		s.log.Warn(w)
	}
	s.cache[projectDir] = l
	return l.policy, nil
}
