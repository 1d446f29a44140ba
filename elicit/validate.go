package elicit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/mail"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/acp-broker/acp-broker/jsonrpc"
)

// FieldError says which field of an answer is wrong and what was expected.
type FieldError struct {
	Field   string
	Problem string
}

func (e *FieldError) Error() string { return fmt.Sprintf("field %q: %s", e.Field, e.Problem) }

// Validate checks an answer's content against the form, exactly: content is
// a strict JSON object (no member repeated or differing from another only in
// case), holds every required field and no name the schema lacks, and each
// value has its field's type (an integer written as one, a number a double
// holds), is one of its choices, has its format, and lies within its
// lengths (in characters), bounds and item counts, with no item picked
// twice. The error names the field and what was expected.
func (f *Form) Validate(content json.RawMessage) error {
	if err := jsonrpc.Strict(content); err != nil {
		return fmt.Errorf("content: %w", err)
	}
	if !json.Valid(content) {
		return fmt.Errorf("content: not valid JSON")
	}
	obj, err := jsonrpc.Members(content)
	if err != nil {
		return fmt.Errorf("content: %w", err)
	}
	for name := range obj {
		if !slices.ContainsFunc(f.Fields, func(fl Field) bool { return fl.Name == name }) {
			return &FieldError{name, "the form has no such field"}
		}
	}
	for i := range f.Fields {
		field := &f.Fields[i]
		v, ok := obj[field.Name]
		if !ok {
			if field.Required {
				return &FieldError{field.Name, "required, and missing"}
			}
			continue
		}
		if err := field.check(v); err != nil {
			return &FieldError{field.Name, err.Error()}
		}
	}
	return nil
}

// check checks one value of the field.
func (f *Field) check(v json.RawMessage) error {
	v = bytes.TrimSpace(v)
	switch f.Type {
	case "string":
		s, err := jsonString(v)
		if err != nil {
			return err
		}
		return f.checkString(s)
	case "integer":
		n, err := parseInteger(v)
		if err != nil {
			return fmt.Errorf("expected an integer, got %s: %w", shortJSON(v), err)
		}
		if f.minInt != nil && n < *f.minInt {
			return fmt.Errorf("%d is below the minimum %d", n, *f.minInt)
		}
		if f.maxInt != nil && n > *f.maxInt {
			return fmt.Errorf("%d is above the maximum %d", n, *f.maxInt)
		}
	case "number":
		x, err := parseNumber(v)
		if err != nil {
			return fmt.Errorf("expected a number, got %s: %w", shortJSON(v), err)
		}
		if f.Minimum != nil && x < *f.Minimum {
			return fmt.Errorf("%v is below the minimum %v", x, *f.Minimum)
		}
		if f.Maximum != nil && x > *f.Maximum {
			return fmt.Errorf("%v is above the maximum %v", x, *f.Maximum)
		}
	case "boolean":
		if s := string(v); s != "true" && s != "false" {
			return fmt.Errorf("expected true or false, got %s", shortJSON(v))
		}
	case "array":
		if len(v) == 0 || v[0] != '[' {
			return fmt.Errorf("expected a list of choices, got %s", shortJSON(v))
		}
		var items []json.RawMessage
		if err := json.Unmarshal(v, &items); err != nil {
			return fmt.Errorf("expected a list of choices: %w", err)
		}
		var picked []string
		for _, item := range items {
			s, err := jsonString(bytes.TrimSpace(item))
			if err != nil {
				return fmt.Errorf("item %d: %w", len(picked), err)
			}
			if !f.offers(s) {
				return fmt.Errorf("item %q is not one of %s", s, f.choiceList())
			}
			if slices.Contains(picked, s) {
				return fmt.Errorf("item %q is picked twice", s)
			}
			picked = append(picked, s)
		}
		if f.MinItems != nil && len(picked) < *f.MinItems {
			return fmt.Errorf("%d picked, at least %d expected", len(picked), *f.MinItems)
		}
		if f.MaxItems != nil && len(picked) > *f.MaxItems {
			return fmt.Errorf("%d picked, at most %d expected", len(picked), *f.MaxItems)
		}
	default:
		return fmt.Errorf("type %q cannot be checked", f.Type)
	}
	return nil
}

func (f *Field) checkString(s string) error {
	if f.Choices != nil {
		if !f.offers(s) {
			return fmt.Errorf("%q is not one of %s", s, f.choiceList())
		}
		return nil
	}
	n := utf8.RuneCountInString(s)
	if f.MinLength != nil && n < *f.MinLength {
		return fmt.Errorf("%d characters, at least %d expected", n, *f.MinLength)
	}
	if f.MaxLength != nil && n > *f.MaxLength {
		return fmt.Errorf("%d characters, at most %d expected", n, *f.MaxLength)
	}
	if f.Format != "" && !hasFormat(s, f.Format) {
		return fmt.Errorf("%q is not a valid %s", s, formatName[f.Format])
	}
	return nil
}

func (f *Field) offers(value string) bool {
	return slices.ContainsFunc(f.Choices, func(c Choice) bool { return c.Value == value })
}

func (f *Field) choiceList() string {
	var values []string
	for _, c := range f.Choices {
		values = append(values, strconv.Quote(c.Value))
	}
	return strings.Join(values, ", ")
}

var formatName = map[string]string{
	"email":     "email address",
	"uri":       "absolute URI",
	"date":      "date (YYYY-MM-DD)",
	"date-time": "date and time (RFC 3339, e.g. 2026-12-01T17:30:00Z)",
}

// hasFormat checks a string format as JSON Schema defines it: email an
// RFC 5322 address alone (no display name), uri an absolute RFC 3986 URI,
// date an RFC 3339 full-date, date-time an RFC 3339 date-time.
func hasFormat(s, format string) bool {
	switch format {
	case "email":
		addr, err := mail.ParseAddress(s)
		return err == nil && addr.Name == "" && addr.Address == s
	case "uri":
		return isAbsoluteURI(s)
	case "date":
		_, err := time.Parse(time.DateOnly, s)
		return err == nil && len(s) == len(time.DateOnly)
	case "date-time":
		_, err := time.Parse(time.RFC3339Nano, s)
		return err == nil
	}
	return false
}

// isAbsoluteURI checks RFC 3986's URI: a scheme, and only characters a URI
// may hold (percent escapes well formed). url.Parse alone takes spaces and
// other characters a URI cannot contain.
func isAbsoluteURI(s string) bool {
	colon := strings.IndexByte(s, ':')
	if colon < 1 {
		return false
	}
	for i, c := range []byte(s[:colon]) {
		letter := c|0x20 >= 'a' && c|0x20 <= 'z'
		if !letter && (i == 0 || !(c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.')) {
			return false
		}
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '%':
			if i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) {
				return false
			}
		case c <= ' ' || c >= 0x7f || strings.IndexByte(`"<>\^`+"`{|}", c) >= 0:
			return false
		}
	}
	u, err := url.Parse(s)
	return err == nil && u.Scheme != ""
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c|0x20 >= 'a' && c|0x20 <= 'f'
}

func jsonString(v json.RawMessage) (string, error) {
	if len(v) == 0 || v[0] != '"' {
		return "", fmt.Errorf("expected a string, got %s", shortJSON(v))
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return "", fmt.Errorf("expected a string: %w", err)
	}
	return s, nil
}

// shortJSON shows a value in an error: quoted so that it cannot fake a line,
// and cut.
func shortJSON(v json.RawMessage) string {
	const limit = 40
	s := string(v)
	if len(s) > limit {
		cut := limit
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return strconv.Quote(s)
}
