package jsonrpc

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
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
	folded := make(map[string]string)
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
		lower := strings.ToLower(name)
		if prev, dup := folded[lower]; dup {
			if prev == name {
				return nil, fmt.Errorf("duplicate member %q", name)
			}
			return nil, fmt.Errorf("members %q and %q differ only in case", prev, name)
		}
		folded[lower] = name
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
// name or has two names that differ only in case. It checks structure, not
// the contents of strings and numbers, which the decoder that reads the
// value checks anyway.
func Strict(v json.RawMessage) error {
	s := scanner{data: v}
	if err := s.strictValue(1); err != nil {
		return err
	}
	return s.atEnd()
}

func (s *scanner) strictValue(depth int) error {
	if depth > maxDepth {
		return errors.New("nested too deeply")
	}
	s.skipSpace()
	if s.pos >= len(s.data) {
		return errEnd
	}
	switch s.data[s.pos] {
	case '{':
		s.pos++
		s.skipSpace()
		if s.pos < len(s.data) && s.data[s.pos] == '}' {
			s.pos++
			return nil
		}
		var seen map[string]string
		for {
			name, err := s.key()
			if err != nil {
				return err
			}
			folded := strings.ToLower(name)
			if prev, dup := seen[folded]; dup {
				if prev == name {
					return fmt.Errorf("duplicate member %q", name)
				}
				return fmt.Errorf("members %q and %q differ only in case", prev, name)
			}
			if seen == nil {
				seen = make(map[string]string)
			}
			seen[folded] = name
			if err := s.strictValue(depth + 1); err != nil {
				return err
			}
			if done, err := s.endOfMember('}'); done || err != nil {
				return err
			}
		}
	case '[':
		s.pos++
		s.skipSpace()
		if s.pos < len(s.data) && s.data[s.pos] == ']' {
			s.pos++
			return nil
		}
		for {
			if err := s.strictValue(depth + 1); err != nil {
				return err
			}
			if done, err := s.endOfMember(']'); done || err != nil {
				return err
			}
		}
	}
	return s.skipValue(depth)
}
