package permission

import (
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/acp-broker/acp-broker/rules"
)

// RecheckInterval is how often, at most, the rule files are checked for
// changes: a request within it of the last check gets the rules of that
// check without a stat, so a burst of requests (and the mode guard, asked
// at every editor message) costs no system call; an edit takes effect for
// every request that starts this long after it. Not file change
// notifications: an inotify event reaches a watcher goroutine
// asynchronously, so the next request could still miss an edit unless the
// queue were read at every request (a system call again), and inotify
// misses changes that stat sees (behind a symbolic link, in a directory
// created later, on a network file system).
const RecheckInterval = 5 * time.Millisecond

// RuleSource loads the rule layers for each project directory and reloads
// them when a file changes, so edits take effect without restarting the
// agent: for every request from RecheckInterval after the edit, and at once
// for the remembered answers this broker stores itself (Changed). A managed
// or user file that becomes invalid keeps the previous rules in force and
// logs the error. A project file that becomes invalid (or unreadable) makes
// its sessions ask for everything, and any change to a project file ends
// its trust at once: its allow rules are never kept as "the previous
// rules".
type RuleSource struct {
	opts rules.LoadOptions // ProjectDir is set per request
	log  *slog.Logger

	mu    sync.Mutex
	cache map[string]*loaded
	// audit, if set, gets a line for each warning about a project file.
	audit *Audit
	agent string
	// fixed is how many of a load's stamps are not of project files.
	fixed int
}

type loaded struct {
	policy *rules.Policy
	stamps []rules.FileStamp
	// checked is when stamps were last compared with the files.
	checked  time.Time
	warnings []string
	// noted are the stamps of the project files whose notes were audited.
	noted []rules.FileStamp
}

// NewRuleSource loads every layer once for startDir and fails on any error
// of the managed or user layers: a broken or unreadable config at start-up
// must stop the broker, never fall back to a looser policy. A project file,
// which comes with the repository, never stops it (see rules.Load).
func NewRuleSource(opts rules.LoadOptions, startDir string, log *slog.Logger) (*RuleSource, []string, error) {
	s := &RuleSource{opts: opts, log: log, cache: map[string]*loaded{}}
	s.fixed = len(s.stamps(""))
	l, err := s.load(startDir, nil)
	if err != nil {
		return nil, nil, err
	}
	s.cache[startDir] = l
	return s, l.warnings, nil
}

// files are the files whose change means reloading: every layer, the trust
// store and the remembered answers (which other brokers may have written).
// The project files come last, as rules.ProjectFiles finds them now: a .git
// or a file that appears on the way is a change too.
func (s *RuleSource) files(projectDir string) []string {
	files := []string{s.opts.Managed, s.opts.User, filepath.Join(s.opts.StateDir, "trust.toml"), rules.StoreIn(s.opts.StateDir).Path}
	files = append(files, s.opts.Extra...)
	return append(files, rules.ProjectFiles(projectDir, s.opts.Home)...)
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

// AuditTo sends warnings about project files to the audit log too, from the
// rules already loaded on.
func (s *RuleSource) AuditTo(audit *Audit, agent string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.audit, s.agent = audit, agent
	for _, l := range s.cache {
		s.note(l.policy)
	}
}

// note writes a policy's project-file warnings to the audit log.
func (s *RuleSource) note(p *rules.Policy) {
	for _, n := range p.ProjectNotes {
		r := Record{Time: time.Now().UTC(), Agent: s.agent, Method: "rules/load", Decision: "warning", Source: "project file", Reason: n}
		if err := s.audit.Write(r); err != nil {
			s.log.Error("cannot write the audit log", "err", err)
		}
	}
}

func (s *RuleSource) load(projectDir string, last *rules.Policy) (*loaded, error) {
	checked := time.Now()
	stamps := s.stamps(projectDir)
	opts := s.opts
	opts.ProjectDir = projectDir
	if last != nil {
		opts.LastProject = last.ProjectFiles()
	}
	policy, warnings, err := rules.Load(opts)
	if err != nil {
		return nil, err
	}
	return &loaded{policy: policy, stamps: stamps, checked: checked, warnings: warnings, noted: s.projectStamps(stamps)}, nil
}

// Changed makes the next Policy check every file, whenever the last check
// was: for a change this broker made itself (a remembered answer), which
// the agent's next request must see.
func (s *RuleSource) Changed() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range s.cache {
		l.checked = time.Time{}
	}
}

// Policy returns the rules in force for a session's directory, reloading
// them if any file changed since they were read (checked at most every
// RecheckInterval).
func (s *RuleSource) Policy(projectDir string) (*rules.Policy, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cached, ok := s.cache[projectDir]
	now := time.Now()
	if ok && now.Sub(cached.checked) < RecheckInterval {
		return cached.policy, nil
	}
	current := s.stamps(projectDir)
	if ok && slices.Equal(cached.stamps, current) {
		cached.checked = now
		return cached.policy, nil
	}
	var last *rules.Policy
	if ok {
		last = cached.policy
	}
	l, err := s.load(projectDir, last)
	if err != nil {
		if !ok {
			return nil, err
		}
		// Keep the rules that were in force; note the new stamps so the error
		// is logged once per change, not once per request. A project file
		// that changed too is trusted no more.
		s.log.Error("a rule file is invalid; the previous rules stay in force", "err", err)
		if projectDir != "" && !slices.Equal(s.projectStamps(cached.stamps), s.projectStamps(current)) {
			cached.policy = cached.policy.WithoutProjectAllows()
		}
		cached.stamps, cached.checked = current, now
		return cached.policy, nil
	}
	if ok {
		s.log.Info("rules reloaded", "dir", projectDir)
	}
	for _, w := range l.warnings {
		s.log.Warn(w)
	}
	// Noted once per version of the project file, not at every reload that
	// another file (a remembered answer, say) caused.
	if !ok || !slices.Equal(cached.noted, l.noted) {
		s.note(l.policy)
	}
	s.cache[projectDir] = l
	return l.policy, nil
}

// projectStamps finds the project files' stamps among a load's stamps: the
// last ones, as files lists them.
func (s *RuleSource) projectStamps(stamps []rules.FileStamp) []rules.FileStamp {
	return stamps[min(s.fixed, len(stamps)):]
}
