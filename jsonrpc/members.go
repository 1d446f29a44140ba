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
