package elicit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
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
// twice; every string and member name is valid UTF-8 and escapes no lone
// surrogate (which Go would read as U+FFFD, and a JavaScript agent as
// itself). The error names the field and what was expected.
func (f *Form) Validate(content json.RawMessage) error {
	if err := jsonrpc.StrictText(content); err != nil {
		return fmt.Errorf("content: %w", err)
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
		// The bounds as the schema wrote them where ParseSchema kept
		// them; else (a Field made by hand) as doubles.
		switch {
		case f.minInt != nil && n < *f.minInt:
			return fmt.Errorf("%d is below the minimum %d", n, *f.minInt)
		case f.minInt == nil && f.Minimum != nil && float64(n) < *f.Minimum:
			return fmt.Errorf("%d is below the minimum %v", n, *f.Minimum)
		case f.maxInt != nil && n > *f.maxInt:
			return fmt.Errorf("%d is above the maximum %d", n, *f.maxInt)
		case f.maxInt == nil && f.Maximum != nil && float64(n) > *f.Maximum:
			return fmt.Errorf("%d is above the maximum %v", n, *f.Maximum)
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
		picked := make(map[string]bool)
		for _, item := range items {
			s, err := jsonString(bytes.TrimSpace(item))
			if err != nil {
				return fmt.Errorf("item %d: %w", len(picked), err)
			}
			if !f.offers(s) {
				return fmt.Errorf("item %q is not one of %s", s, f.choiceList())
			}
			if picked[s] {
				return fmt.Errorf("item %q is picked twice", s)
			}
			picked[s] = true
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
	if f.offered != nil {
		return f.offered[value]
	}
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

// hasFormat checks a string format as JSON Schema defines it, in the
// plain form every common reader accepts (Go's own parsers take more: a
// one-digit hour, a "," before the fraction, an offset of +24:00, a display
// name or a dotless domain in an address):
//   - email: an RFC 5321 mailbox of ASCII dot-atoms, at a domain of two or
//     more host names' labels (no quoted local part, no address literal);
//   - uri: an absolute RFC 3986 URI;
//   - date: an RFC 3339 full-date, a day that exists;
//   - date-time: an RFC 3339 date-time with "T", "Z" or a ±hh:mm offset,
//     and no leap second.
func hasFormat(s, format string) bool {
	switch format {
	case "email":
		return isEmail(s)
	case "uri":
		return IsAbsoluteURI(s)
	case "date":
		return isDate(s)
	case "date-time":
		return isDateTime(s)
	}
	return false
}

func isDate(s string) bool {
	if !digitsAt(s, "dddd-dd-dd") {
		return false
	}
	_, err := time.Parse(time.DateOnly, s)
	return err == nil
}

func isDateTime(s string) bool {
	const shape = "dddd-dd-ddTdd:dd:dd"
	if len(s) < len(shape) || !digitsAt(s[:len(shape)], shape) {
		return false
	}
	rest := s[len(shape):]
	if rest != "" && rest[0] == '.' {
		n := 1
		for n < len(rest) && rest[n] >= '0' && rest[n] <= '9' {
			n++
		}
		if n == 1 {
			return false // a "." without digits
		}
		rest = rest[n:]
	}
	switch {
	case rest == "Z":
	case len(rest) == 6 && (rest[0] == '+' || rest[0] == '-') && digitsAt(rest[1:], "dd:dd"):
		if rest[1:3] > "23" || rest[4:6] > "59" {
			return false
		}
	default:
		return false
	}
	_, err := time.Parse(time.RFC3339Nano, s)
	return err == nil
}

// digitsAt reports whether s has the shape: 'd' a decimal digit, any other
// byte itself.
func digitsAt(s, shape string) bool {
	if len(s) != len(shape) {
		return false
	}
	for i := range len(s) {
		if shape[i] == 'd' && (s[i] < '0' || s[i] > '9') || shape[i] != 'd' && s[i] != shape[i] {
			return false
		}
	}
	return true
}

func isEmail(s string) bool {
	local, domain, ok := strings.Cut(s, "@")
	if !ok || len(local) > 64 || len(domain) > 253 {
		return false
	}
	for _, atom := range strings.Split(local, ".") {
		if atom == "" || strings.ContainsFunc(atom, func(r rune) bool { return !isAtext(r) }) {
			return false
		}
	}
	labels := strings.Split(domain, ".")
	if len(labels) < 2 {
		return false
	}
	for _, label := range labels {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' ||
			strings.ContainsFunc(label, func(r rune) bool { return !isAlnum(r) && r != '-' }) {
			return false
		}
	}
	return true
}

// isAtext reports whether r may stand in an RFC 5322 atom.
func isAtext(r rune) bool { return isAlnum(r) || strings.ContainsRune("!#$%&'*+-/=?^_`{|}~", r) }

func isAlnum(r rune) bool {
	return r < utf8.RuneSelf && (r|0x20 >= 'a' && r|0x20 <= 'z' || r >= '0' && r <= '9')
}

// IsAbsoluteURI reports whether s is an absolute RFC 3986 URI, as the "uri"
// format checks it (also for a URL the broker shows a human, which must read
// the same to every reader): a scheme, and only characters a URI may hold
// (percent escapes well formed). url.Parse alone takes spaces and other
// characters a URI cannot contain.
func IsAbsoluteURI(s string) bool {
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
	if strings.Count(s, "#") > 1 {
		return false // a fragment cannot hold "#"
	}
	u, err := url.Parse(s)
	if err != nil || u.Scheme == "" {
		return false
	}
	// Brackets may only enclose an IP literal host.
	if strings.ContainsAny(s, "[]") && (strings.Count(s, "[") != 1 || strings.Count(s, "]") != 1 || !strings.HasPrefix(u.Host, "[")) {
		return false
	}
	return true
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c|0x20 >= 'a' && c|0x20 <= 'f'
}

func jsonString(v json.RawMessage) (string, error) {
	if len(v) == 0 || v[0] != '"' {
		return "", fmt.Errorf("expected a string, got %s", shortJSON(v))
	}
	if !jsonrpc.ExactUnicode(v) {
		return "", errors.New("a string with invalid UTF-8 or a lone surrogate escape, which readers decode differently")
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return "", fmt.Errorf("expected a string: %w", err)
	}
	return s, nil
}

// shortJSON shows a JSON value in an error: compact, cut to 40 bytes, and
// quoted when it holds a character that would not show as itself, so that
// the agent's text cannot break or fake a line.
func shortJSON(v json.RawMessage) string {
	const limit = 40
	var compact bytes.Buffer
	s := string(v)
	if json.Compact(&compact, v) == nil {
		s = compact.String()
	}
	if len(s) > limit {
		cut := limit
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	if strings.ContainsFunc(s, func(r rune) bool { return !unicode.IsPrint(r) || r == utf8.RuneError }) {
		return strconv.QuoteToASCII(s)
	}
	return s
}
