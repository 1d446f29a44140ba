package jsonrpc

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Members decodes a JSON object into its members without decoding their
// values, and refuses an object in which two member names are equal or differ
// only in letter case: decoders disagree on which of them counts, so a
// message carrying them could mean one thing to the broker and another to the
// peer.
func Members(obj json.RawMessage) (map[string]json.RawMessage, error) {
	s := scanner{data: obj}
	s.skipSpace()
	if s.pos >= len(obj) || obj[s.pos] != '{' {
		return nil, fmt.Errorf("not a JSON object")
	}
	s.pos++
	members := make(map[string]json.RawMessage)
	var names uniqueNames
	s.skipSpace()
	if s.pos < len(obj) && obj[s.pos] == '}' {
		s.pos++
		return members, s.atEnd()
	}
	for {
		name, err := s.key()
		if err != nil {
			return nil, err
		}
		start := s.pos
		if err := s.skipValue(1); err != nil {
			return nil, err
		}
		if err := names.add(name); err != nil {
			return nil, err
		}
		members[name] = obj[start:s.pos]
		done, err := s.endOfMember('}')
		if err != nil {
			return nil, err
		}
		if done {
			return members, s.atEnd()
		}
	}
}

func (s *scanner) atEnd() error {
	s.skipSpace()
	if s.pos != len(s.data) {
		return fmt.Errorf("unexpected data after the object at byte %d", s.pos)
	}
	return nil
}

// Strict checks a JSON value at every depth: no object repeats a member
// name or has two names that differ only in case, and strings and numbers
// are as strictly formed as encoding/json's Valid requires.
func Strict(v json.RawMessage) error {
	s := scanner{data: v, strict: true}
	if err := s.skipValue(1); err != nil {
		return err
	}
	return s.atEnd()
}

// StrictText is Strict, and also refuses any string or member name, at any
// depth, that is not exact Unicode (ExactUnicode): for a value whose every
// string the broker compares with what a peer reads, such as a form's
// schema and its answer, where Go would read "\ud800" and "\ufffd" as one.
//
// The Unicode check is a second pass over the strings of a value Strict
// took, rather than a step of the scanner: the scanner reads every string
// of every message, and a check made there, even one skipped, cost each
// relayed message's strings more than the few small values that need it.
func StrictText(v json.RawMessage) error {
	if err := Strict(v); err != nil {
		return err
	}
	for i := 0; i < len(v); i++ {
		if v[i] != '"' {
			continue
		}
		// Strict took v, so outside strings a quote starts one, and
		// inside one a quote after a backslash is escaped.
		end := i + 1
		for v[end] != '"' {
			if v[end] == '\\' {
				end++
			}
			end++
		}
		if !exactUnicode(v[i : end+1]) {
			return fmt.Errorf("the string at byte %d is not valid Unicode (invalid UTF-8 or a lone surrogate escape): peers read it differently", i)
		}
		i = end
	}
	return nil
}

// ExactMembers is Members for an object the broker reads by name, that a
// peer may read too: it also refuses a member whose name differs only in
// case from one of names. A peer that matches names without regard to case,
// as Go's encoding/json does, would take "Path" for "path", while the broker
// reads only "path".
func ExactMembers(obj json.RawMessage, names ...string) (map[string]json.RawMessage, error) {
	members, err := Members(obj)
	if err != nil {
		return nil, err
	}
	for got := range members {
		if want, ok := caseVariant(got, names); ok {
			return nil, fmt.Errorf("member %q differs only in case from %q", got, want)
		}
	}
	return members, nil
}

// caseVariant reports the name of names that name equals only when letter
// case is ignored.
func caseVariant(name string, names []string) (string, bool) {
	for _, n := range names {
		if name != n && strings.EqualFold(name, n) {
			return n, true
		}
	}
	return "", false
}

// uniqueNames records an object's member names for a strict scan. The
// first few are compared in place, so that checking a small object (most
// are) allocates nothing; beyond them names are kept by their fold.
type uniqueNames struct {
	few    [8]string
	n      int
	folded map[string]string // every name, by foldName, once few is full
}

func (u *uniqueNames) add(name string) error {
	if u.folded == nil {
		for _, prev := range u.few[:u.n] {
			if strings.EqualFold(prev, name) { // as foldName compares
				return sameName(prev, name)
			}
		}
		if u.n < len(u.few) {
			u.few[u.n] = name
			u.n++
			return nil
		}
		u.folded = make(map[string]string, 2*len(u.few))
		for _, prev := range u.few {
			u.folded[foldName(prev)] = prev
		}
	}
	folded := foldName(name)
	if prev, dup := u.folded[folded]; dup {
		return sameName(prev, name)
	}
	u.folded[folded] = name
	return nil
}

func sameName(prev, name string) error {
	if prev == name {
		return fmt.Errorf("duplicate member %q", name)
	}
	return fmt.Errorf("members %q and %q differ only in case", prev, name)
}

// foldName returns a form of name that is the same for two names exactly
// when strings.EqualFold says they are equal, as encoding/json matches
// member names: "ſ" (U+017F) folds with "s" and "K" (U+212A) with "k", so
// lower-casing would miss "paramſ". Invalid UTF-8 folds to U+FFFD, as the
// decoders read it. A lower-case ASCII name is its own fold.
func foldName(name string) string {
	plain := true
	for i := 0; i < len(name) && plain; i++ {
		plain = name[i] < utf8.RuneSelf && (name[i] < 'A' || name[i] > 'Z')
	}
	if plain {
		return name
	}
	b := make([]byte, 0, len(name))
	for _, r := range name {
		b = utf8.AppendRune(b, unicode.ToLower(smallestFold(r)))
	}
	return string(b)
}

// smallestFold returns the smallest rune of r's case-folding orbit.
func smallestFold(r rune) rune {
	for {
		next := unicode.SimpleFold(r)
		if next <= r {
			return next
		}
		r = next
	}
}

// Namesake is a member of an object whose name equals a wanted one when
// letter case is ignored.
type Namesake struct {
	Name  string // as decoded from the object, escapes resolved
	Value json.RawMessage
}

// Namesakes returns, for each of names, every member of obj whose name
// equals it when letter case is ignored, as Go's encoding/json matches
// names, in order, in one pass over obj. Where Field reads the first exact
// one, peers may read another: JavaScript's JSON.parse and encoding/json
// keep the last, and encoding/json also takes "Name" for "name". Anything
// but one member spelled as wanted (see Only) means the object may mean
// something else to a peer. It returns nil when obj is not an object or
// cannot be scanned.
func Namesakes(obj json.RawMessage, names ...string) [][]Namesake {
	out, _ := NestedNamesakes(obj, names, -1)
	return out
}

// NestedNamesakes is Namesakes of obj for names, and, for each member
// counted under names[within] whose value is an object, Namesakes of that
// value for inner, in the same one pass over obj: nested holds one entry per
// such member, in order. A peer may read any of them, and a value large
// enough to matter (a streamed chunk) is then read once, not twice.
func NestedNamesakes(obj json.RawMessage, names []string, within int, inner ...string) (outer [][]Namesake, nested [][][]Namesake) {
	s := scanner{data: obj}
	s.skipSpace()
	if s.pos >= len(obj) || obj[s.pos] != '{' {
		return nil, nil
	}
	outer, err := s.namesakes(names, within, inner, &nested, 1)
	if err != nil {
		return nil, nil
	}
	return outer, nested
}

// namesakes scans the object at s.pos for NestedNamesakes, leaving s.pos
// after it.
func (s *scanner) namesakes(names []string, within int, inner []string, nested *[][][]Namesake, depth int) ([][]Namesake, error) {
	if depth > maxDepth {
		return nil, errors.New("nested too deeply")
	}
	s.pos++ // the opening brace
	out := make([][]Namesake, len(names))
	s.skipSpace()
	if s.pos < len(s.data) && s.data[s.pos] == '}' {
		s.pos++
		return out, nil
	}
	for {
		got, err := s.key()
		if err != nil {
			return nil, err
		}
		start := s.pos
		// strings.EqualFold folds as foldName does, without allocating.
		i := slices.IndexFunc(names, func(n string) bool { return strings.EqualFold(n, got) })
		s.skipSpace()
		if i >= 0 && i == within && s.pos < len(s.data) && s.data[s.pos] == '{' {
			in, err := s.namesakes(inner, -1, nil, nil, depth+1)
			if err != nil {
				return nil, err
			}
			*nested = append(*nested, in)
		} else if err := s.skipValue(depth); err != nil {
			return nil, err
		}
		if i >= 0 {
			out[i] = append(out[i], Namesake{Name: got, Value: s.data[start:s.pos]})
		}
		done, err := s.endOfMember('}')
		if err != nil {
			return nil, err
		}
		if done {
			return out, nil
		}
	}
}

// Only reports whether namesakes are exactly one member spelled name, and
// returns its value.
func Only(namesakes []Namesake, name string) (json.RawMessage, bool) {
	if len(namesakes) != 1 || namesakes[0].Name != name {
		return nil, false
	}
	return namesakes[0].Value, true
}
