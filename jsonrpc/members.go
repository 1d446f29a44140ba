package jsonrpc

import (
	"encoding/json"
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
// name or has two names that differ only in case. It checks structure, not
// the contents of strings and numbers, which the decoder that reads the
// value checks anyway.
func Strict(v json.RawMessage) error {
	s := scanner{data: v, strict: true}
	if err := s.skipValue(1); err != nil {
		return err
	}
	return s.atEnd()
}

// uniqueNames records an object's member names for a strict scan.
type uniqueNames map[string]string

func (u *uniqueNames) add(name string) error {
	folded := strings.ToLower(name)
	if prev, dup := (*u)[folded]; dup {
		if prev == name {
			return fmt.Errorf("duplicate member %q", name)
		}
		return fmt.Errorf("members %q and %q differ only in case", prev, name)
	}
	if *u == nil {
		*u = make(uniqueNames)
	}
	(*u)[folded] = name
	return nil
}
