package rules

import (
	"regexp"
	"strings"
	"sync"
)

// locator finds where a key is written in a TOML file, for error messages.
// The TOML decoder reports positions only for syntax errors, and collapses
// the keys of all [[rule]] tables into one, so the file's lines are read once
// here: each table header starts a block, and each `key =` line is filed
// under its block. A key not written as `key =` may be a table of its own
// ([rule.x], [ask.x], an unknown [section]): it is found at that header.
type locator struct {
	blocks []block // blocks[0] holds the keys before the first header
	rules  []int   // index in blocks of each [[rule]], in order
	tables map[string]int
	arrays map[string][]int // index in blocks of each [[name]] other than rule
}

type block struct {
	name   string // the header's dotted name, "" for blocks[0]
	header pos
	keys   map[string]pos
}

// pos is a 1-based line and column.
type pos struct{ line, col int }

var (
	headerLine = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^\s*(\[\[?)\s*([A-Za-z0-9_."' -]+?)\s*\]\]?\s*(#.*)?$`)
	})
	// A dotted key (ask.route = ...) is filed under its first name.
	keyLine = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^(\s*)("[^"]*"|'[^']*'|[A-Za-z0-9_-]+)\s*[=.]`) })
	pathSep = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\s*\.\s*`) })
)

func newLocator(src string) *locator {
	// The decoder skips a byte order mark; so must the lines, or the first
	// header is not seen as one.
	src = strings.TrimPrefix(src, "\ufeff")
	l := &locator{blocks: []block{{header: pos{1, 1}, keys: map[string]pos{}}}, tables: map[string]int{}, arrays: map[string][]int{}}
	for i, line := range strings.Split(src, "\n") {
		if m := headerLine().FindStringSubmatchIndex(line); m != nil {
			name := pathSep().ReplaceAllString(strings.ReplaceAll(line[m[4]:m[5]], `"`, ""), ".")
			l.blocks = append(l.blocks, block{name: name, header: pos{i + 1, m[2] + 1}, keys: map[string]pos{}})
			idx := len(l.blocks) - 1
			if line[m[2]:m[3]] == "[[" && name == "rule" {
				l.rules = append(l.rules, idx)
			} else if line[m[2]:m[3]] == "[[" {
				l.arrays[name] = append(l.arrays[name], idx)
			} else if _, seen := l.tables[name]; !seen {
				l.tables[name] = idx
			}
			continue
		}
		if m := keyLine().FindStringSubmatchIndex(line); m != nil {
			key := strings.Trim(line[m[4]:m[5]], `"'`)
			b := &l.blocks[len(l.blocks)-1]
			if _, seen := b.keys[key]; !seen {
				b.keys[key] = pos{i + 1, m[4] + 1}
			}
		}
	}
	return l
}

// in returns the position of key in a block, or of the header of a table
// below the block named by it, or the block's header.
func (l *locator) in(idx int, key string) pos {
	if idx < 0 || idx >= len(l.blocks) {
		return pos{1, 1}
	}
	b := l.blocks[idx]
	if p, ok := b.keys[key]; ok {
		return p
	}
	if key != "" {
		name := key
		if b.name != "" {
			name = b.name + "." + key
		}
		if p, ok := l.header(name, idx); ok {
			return p
		}
	}
	return b.header
}

// header locates the first header after block idx that is of the table
// name or of one below it; for the block of an array of tables ([[rule]]),
// only up to the array's next table, since a [rule.x] there belongs to it.
func (l *locator) header(name string, idx int) (pos, bool) {
	for _, b := range l.blocks[idx+1:] {
		if b.name == name || strings.HasPrefix(b.name, name+".") {
			return b.header, true
		}
		if idx > 0 && b.name == l.blocks[idx].name {
			break
		}
	}
	return pos{}, false
}

// topKey locates a key before the first table header, or the table it names.
func (l *locator) topKey(key string) pos { return l.in(0, key) }

// rule locates the header of the i-th [[rule]]; for rules written as
// rule = [{...}], the rule key.
func (l *locator) rule(i int) pos {
	if i < len(l.rules) {
		return l.blocks[l.rules[i]].header
	}
	return l.topKey("rule")
}

// ruleKey locates a key inside the i-th [[rule]].
func (l *locator) ruleKey(i int, key string) pos {
	if i >= len(l.rules) {
		return l.rule(i)
	}
	return l.in(l.rules[i], key)
}

// tableKey locates a key inside a [a.b] table; when the file has no such
// header, the table below it, or where the first name is set.
func (l *locator) tableKey(key string, path ...string) pos {
	name := strings.Join(path, ".")
	if idx, ok := l.tables[name]; ok {
		return l.in(idx, key)
	}
	if key != "" {
		if p, ok := l.header(name+"."+key, 0); ok {
			return p
		}
	}
	if p, ok := l.header(name, 0); ok {
		return p
	}
	return l.topKey(path[0])
}

// arrayTable locates the header of the i-th [[name]] table.
func (l *locator) arrayTable(name string, i int) pos {
	if idx := l.arrays[name]; i < len(idx) {
		return l.blocks[idx[i]].header
	}
	return l.topKey(name)
}

// arrayTableKey locates a key inside the i-th [[name]] table.
func (l *locator) arrayTableKey(name string, i int, key string) pos {
	if idx := l.arrays[name]; i < len(idx) {
		return l.in(idx[i], key)
	}
	return l.arrayTable(name, i)
}
