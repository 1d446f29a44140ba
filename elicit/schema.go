// Package elicit reads the form an agent's question (ACP elicitation/create)
// asks for, and checks a human's answer against it.
//
// It owns the one reading of a requestedSchema that every channel and the
// broker share, so that an answer one place accepts is an answer every place
// accepts. It reads only the flat, primitive-typed schemas ACP defines
// (ElicitationSchema and its property schemas) and refuses any schema it
// cannot check exactly: a question with such a schema can be answered only in
// the editor. It does no I/O and knows nothing of channels or the wire.
package elicit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/acp-broker/acp-broker/jsonrpc"
)

// Form is the form a requestedSchema describes.
type Form struct {
	Title, Description string
	Fields             []Field // in the schema's order
}

// Field is one property of the form: one value the human gives.
type Field struct {
	Name, Title, Description string
	// Type is "string", "number", "integer", "boolean" or "array" (a
	// multi-select of Choices).
	Type     string
	Required bool
	// Choices are a single-select string's (enum, or oneOf with titles) or
	// a multi-select's items (items.enum, or items.anyOf with titles).
	Choices []Choice
	// Format is a string's: "email", "uri", "date" or "date-time".
	Format                                   string
	MinLength, MaxLength, MinItems, MaxItems *int
	Minimum, Maximum                         *float64
	// Default is the schema's default for the field, kept only when it is
	// itself a valid value of the field (ACP drops an invalid default).
	Default json.RawMessage

	// An integer's bounds as the schema wrote them: a float64 cannot hold
	// every int64.
	minInt, maxInt *int64
	// offered holds the values of Choices, for a Field ParseSchema made:
	// an answer picks among up to maxChoices of them.
	offered map[string]bool
}

// Choice is one value a choice field offers.
type Choice struct {
	Value, Title string
	Description  string
}

// Label is the choice's title, or its value when it has none.
func (c Choice) Label() string {
	if c.Title != "" {
		return c.Title
	}
	return c.Value
}

// Members each object of a schema may have. Every other member could be a
// constraint the broker would not check (pattern, multipleOf, const, allOf,
// ...), so a schema carrying one is refused: the editor must answer it.
var (
	schemaMembers  = []string{"type", "title", "description", "properties", "required", "_meta", "$schema", "additionalProperties"}
	commonMembers  = []string{"type", "title", "description", "default", "_meta"}
	stringMembers  = []string{"minLength", "maxLength", "format", "enum", "enumNames", "oneOf"}
	numberMembers  = []string{"minimum", "maximum"}
	arrayMembers   = []string{"items", "minItems", "maxItems", "uniqueItems"}
	itemsMembers   = []string{"type", "enum", "anyOf", "_meta"}
	optionMembers  = []string{"const", "title", "description", "_meta"}
	knownFormats   = []string{"email", "uri", "date", "date-time"}
	fieldTypeNames = []string{"string", "number", "integer", "boolean", "array"}
)

// ParseSchema reads an elicitation's requestedSchema. It returns an error for
// a schema the broker cannot check answers against exactly: one that is not
// strict JSON with exact Unicode in every string and name (ExactUnicode), has
// a property type or keyword ACP does not define (or a pattern, whose
// ECMA-262 meaning Go's regexp does not share), bounds that are not numbers
// or contradict each other, choices that are empty, repeat a value, or come
// with lengths, or more fields or choices than the broker checks (maxFields,
// maxChoices).
func ParseSchema(raw json.RawMessage) (*Form, error) {
	if err := jsonrpc.StrictText(raw); err != nil {
		return nil, fmt.Errorf("requestedSchema: %w", err)
	}
	top, err := members(raw, "requestedSchema", schemaMembers)
	if err != nil {
		return nil, err
	}
	var form Form
	if t, ok := present(top, "type"); ok {
		var s string
		if json.Unmarshal(t, &s) != nil || s != "object" {
			return nil, fmt.Errorf("requestedSchema: type is %s, not \"object\"", shortJSON(t))
		}
	}
	form.Title, form.Description = annotation(top, "title"), annotation(top, "description")
	if extra, ok := top["additionalProperties"]; ok && !bytes.Equal(bytes.TrimSpace(extra), []byte("false")) {
		return nil, fmt.Errorf("requestedSchema: additionalProperties is %s: only false (no other names) can be checked", shortJSON(extra))
	}
	if props, ok := top["properties"]; ok && !jsonrpc.IsNull(props) {
		names, values, err := orderedMembers(props)
		if err != nil {
			return nil, fmt.Errorf("requestedSchema: properties: %w", err)
		}
		if len(names) > maxFields {
			return nil, fmt.Errorf("requestedSchema: %d properties, more than the %d the broker checks", len(names), maxFields)
		}
		for i, name := range names {
			field, err := parseField(name, values[i])
			if err != nil {
				return nil, err
			}
			form.Fields = append(form.Fields, field)
		}
	}
	if req, ok := top["required"]; ok && !jsonrpc.IsNull(req) {
		var names []string
		if err := json.Unmarshal(req, &names); err != nil {
			return nil, fmt.Errorf("requestedSchema: required is not a list of names: %s", shortJSON(req))
		}
		index := make(map[string]int, len(form.Fields))
		for i, f := range form.Fields {
			index[f.Name] = i
		}
		for _, name := range names {
			i, ok := index[name]
			if !ok {
				// No answer could hold it: content may name only the
				// schema's properties.
				return nil, fmt.Errorf("requestedSchema: required field %q is not among the properties", name)
			}
			form.Fields[i].Required = true
		}
	}
	return &form, nil
}

func parseField(name string, raw json.RawMessage) (Field, error) {
	f := Field{Name: name}
	where := fmt.Sprintf("field %q", name)
	var typ string
	obj, err := jsonrpc.Members(raw)
	if err != nil {
		return f, fmt.Errorf("%s: %w", where, err)
	}
	if t, ok := obj["type"]; !ok || json.Unmarshal(t, &typ) != nil || !slices.Contains(fieldTypeNames, typ) {
		return f, fmt.Errorf("%s: type %s is not one the broker can check (string, number, integer, boolean, array)", where, orNothing(obj["type"]))
	}
	f.Type = typ
	allowed := slices.Clone(commonMembers)
	switch typ {
	case "string":
		allowed = append(allowed, stringMembers...)
	case "number", "integer":
		allowed = append(allowed, numberMembers...)
	case "array":
		allowed = append(allowed, arrayMembers...)
	}
	if err := onlyMembers(obj, where, allowed); err != nil {
		return f, err
	}
	f.Title, f.Description = annotation(obj, "title"), annotation(obj, "description")
	switch typ {
	case "string":
		err = f.parseString(obj, where)
	case "number", "integer":
		err = f.parseNumberBounds(obj, where)
	case "array":
		err = f.parseArray(obj, where)
	}
	if err != nil {
		return f, err
	}
	if f.Choices != nil {
		f.offered = make(map[string]bool, len(f.Choices))
		for _, c := range f.Choices {
			f.offered[c.Value] = true
		}
	}
	if d, ok := obj["default"]; ok && !jsonrpc.IsNull(d) && f.check(d) == nil {
		f.Default = d
	}
	return f, nil
}

func (f *Field) parseString(obj map[string]json.RawMessage, where string) error {
	var err error
	if f.MinLength, err = optionalCount(obj, "minLength", where, maxLength); err != nil {
		return err
	}
	if f.MaxLength, err = optionalCount(obj, "maxLength", where, maxLength); err != nil {
		return err
	}
	if f.MinLength != nil && f.MaxLength != nil && *f.MinLength > *f.MaxLength {
		return fmt.Errorf("%s: minLength %d is above maxLength %d", where, *f.MinLength, *f.MaxLength)
	}
	if f.Format, err = optionalString(obj, "format", where); err != nil {
		return err
	}
	if f.Format != "" && !slices.Contains(knownFormats, f.Format) {
		return fmt.Errorf("%s: format %q is not one the broker can check (email, uri, date, date-time)", where, f.Format)
	}
	enum, hasEnum := present(obj, "enum")
	oneOf, hasOneOf := present(obj, "oneOf")
	names, hasNames := present(obj, "enumNames")
	switch {
	case hasEnum && hasOneOf:
		return fmt.Errorf("%s: both enum and oneOf: which choices count is unclear", where)
	case hasNames && !hasEnum:
		return fmt.Errorf("%s: enumNames without enum", where)
	case hasEnum:
		var values, titles []string
		if err := json.Unmarshal(enum, &values); err != nil {
			return fmt.Errorf("%s: enum is not a list of strings: %s", where, shortJSON(enum))
		}
		if hasNames {
			// Older MCP servers title an enum this way.
			if json.Unmarshal(names, &titles) != nil || len(titles) != len(values) {
				return fmt.Errorf("%s: enumNames is not one string per enum value", where)
			}
		}
		for i, v := range values {
			c := Choice{Value: v}
			if titles != nil {
				c.Title = titles[i]
			}
			f.Choices = append(f.Choices, c)
		}
	case hasOneOf:
		if f.Choices, err = parseOptions(oneOf, where+": oneOf"); err != nil {
			return err
		}
	}
	if (hasEnum || hasOneOf) && f.Format != "" {
		return fmt.Errorf("%s: both choices and a format", where)
	}
	if (hasEnum || hasOneOf) && (f.MinLength != nil || f.MaxLength != nil) {
		// A choice would have to meet them too, and a form that offers a
		// choice it then refuses is no form to show.
		return fmt.Errorf("%s: both choices and a length", where)
	}
	return checkChoices(f.Choices, hasEnum || hasOneOf, where)
}

func (f *Field) parseNumberBounds(obj map[string]json.RawMessage, where string) error {
	for _, bound := range []struct {
		name string
		f    **float64
		i    **int64
	}{{"minimum", &f.Minimum, &f.minInt}, {"maximum", &f.Maximum, &f.maxInt}} {
		raw, ok := present(obj, bound.name)
		if !ok {
			continue
		}
		if f.Type == "integer" {
			n, err := parseInteger(raw)
			if err != nil {
				return fmt.Errorf("%s: %s %s: %w", where, bound.name, shortJSON(raw), err)
			}
			x := float64(n)
			*bound.i, *bound.f = &n, &x
			continue
		}
		x, err := parseNumber(raw)
		if err != nil {
			return fmt.Errorf("%s: %s %s: %w", where, bound.name, shortJSON(raw), err)
		}
		*bound.f = &x
	}
	if f.Type == "integer" && f.minInt != nil && f.maxInt != nil && *f.minInt > *f.maxInt ||
		f.Minimum != nil && f.Maximum != nil && *f.Minimum > *f.Maximum {
		return fmt.Errorf("%s: minimum %v is above maximum %v", where, *f.Minimum, *f.Maximum)
	}
	return nil
}

func (f *Field) parseArray(obj map[string]json.RawMessage, where string) error {
	var err error
	if f.MinItems, err = optionalCount(obj, "minItems", where, maxCount); err != nil {
		return err
	}
	if f.MaxItems, err = optionalCount(obj, "maxItems", where, maxCount); err != nil {
		return err
	}
	if f.MinItems != nil && f.MaxItems != nil && *f.MinItems > *f.MaxItems {
		return fmt.Errorf("%s: minItems %d is above maxItems %d", where, *f.MinItems, *f.MaxItems)
	}
	if u, ok := present(obj, "uniqueItems"); ok {
		// Items are checked unique either way: a multi-select that picks a
		// choice twice is no answer.
		var b bool
		if json.Unmarshal(u, &b) != nil {
			return fmt.Errorf("%s: uniqueItems is not a boolean: %s", where, shortJSON(u))
		}
	}
	items, ok := present(obj, "items")
	if !ok {
		return fmt.Errorf("%s: a multi-select without items", where)
	}
	where += ": items"
	it, err := members(items, where, itemsMembers)
	if err != nil {
		return err
	}
	if t, ok := present(it, "type"); ok {
		var s string
		if json.Unmarshal(t, &s) != nil || s != "string" {
			return fmt.Errorf("%s: type %s is not \"string\"", where, shortJSON(t))
		}
	}
	enum, hasEnum := present(it, "enum")
	anyOf, hasAnyOf := present(it, "anyOf")
	switch {
	case hasEnum == hasAnyOf:
		return fmt.Errorf("%s: need exactly one of enum or anyOf (a multi-select picks among choices)", where)
	case hasEnum:
		var values []string
		if err := json.Unmarshal(enum, &values); err != nil {
			return fmt.Errorf("%s: enum is not a list of strings: %s", where, shortJSON(enum))
		}
		for _, v := range values {
			f.Choices = append(f.Choices, Choice{Value: v})
		}
	default:
		if f.Choices, err = parseOptions(anyOf, where+": anyOf"); err != nil {
			return err
		}
	}
	return checkChoices(f.Choices, true, where)
}

// parseOptions reads a list of EnumOption objects ({const, title,
// description?}).
func parseOptions(raw json.RawMessage, where string) ([]Choice, error) {
	var list []json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, fmt.Errorf("%s: not a list: %s", where, shortJSON(raw))
	}
	var choices []Choice
	for i, item := range list {
		at := fmt.Sprintf("%s[%d]", where, i)
		obj, err := members(item, at, optionMembers)
		if err != nil {
			return nil, err
		}
		var c Choice
		if err := json.Unmarshal(obj["const"], &c.Value); err != nil || obj["const"] == nil {
			return nil, fmt.Errorf("%s: const is not a string", at)
		}
		if err := json.Unmarshal(obj["title"], &c.Title); err != nil || obj["title"] == nil {
			return nil, fmt.Errorf("%s: title is not a string", at)
		}
		c.Description = annotation(obj, "description")
		choices = append(choices, c)
	}
	return choices, nil
}

func checkChoices(choices []Choice, declared bool, where string) error {
	if declared && len(choices) == 0 {
		return fmt.Errorf("%s: no choices: no value could answer it", where)
	}
	if len(choices) > maxChoices {
		return fmt.Errorf("%s: %d choices, more than the %d the broker checks", where, len(choices), maxChoices)
	}
	seen := make(map[string]bool, len(choices))
	for _, c := range choices {
		if seen[c.Value] {
			return fmt.Errorf("%s: choice %q is offered twice", where, c.Value)
		}
		seen[c.Value] = true
	}
	return nil
}

// members reads an object and refuses any member not in allowed.
func members(raw json.RawMessage, where string, allowed []string) (map[string]json.RawMessage, error) {
	obj, err := jsonrpc.Members(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	return obj, onlyMembers(obj, where, allowed)
}

func onlyMembers(obj map[string]json.RawMessage, where string, allowed []string) error {
	for name := range obj {
		if !slices.Contains(allowed, name) {
			if name == "pattern" {
				return fmt.Errorf("%s: a pattern (an ECMA-262 regular expression, which Go's regexp does not read the same way) cannot be checked by the broker", where)
			}
			return fmt.Errorf("%s: %q is not a keyword the broker can check", where, name)
		}
	}
	return nil
}

// orderedMembers returns an object's member names and values in the order
// they appear: the form shows its fields in the schema's order.
func orderedMembers(raw json.RawMessage) ([]string, []json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, nil, errors.New("not an object")
	}
	var names []string
	var values []json.RawMessage
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, nil, err
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, nil, err
		}
		names = append(names, tok.(string))
		values = append(values, v)
	}
	return names, values, nil
}

func present(obj map[string]json.RawMessage, name string) (json.RawMessage, bool) {
	v, ok := obj[name]
	if !ok || jsonrpc.IsNull(v) {
		return nil, false
	}
	return v, true
}

func orNothing(v json.RawMessage) string {
	if v == nil {
		return "(none)"
	}
	return shortJSON(v)
}

// annotation reads a title or description, which only describe: as ACP
// says, one that is not a string counts as none.
func annotation(obj map[string]json.RawMessage, name string) string {
	var s string
	if v, ok := present(obj, name); ok && json.Unmarshal(v, &s) == nil {
		return s
	}
	return ""
}

func optionalString(obj map[string]json.RawMessage, name, where string) (string, error) {
	v, ok := present(obj, name)
	if !ok {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return "", fmt.Errorf("%s: %s is not a string: %s", where, name, shortJSON(v))
	}
	return s, nil
}

// The most fields and choices a field offers that a schema may have: a
// human answers a form by hand, and the broker reads the schema each time a
// channel asks. A schema with more is one the broker cannot check: only the
// editor answers it.
const (
	maxFields  = 100
	maxChoices = 1000
)

// The largest lengths and item counts a schema may give: ACP's uint32 and
// uint64, as far as an int holds them.
const (
	maxLength = min(math.MaxUint32, math.MaxInt)
	maxCount  = math.MaxInt
)

// optionalCount reads a non-negative whole number of at most limit.
func optionalCount(obj map[string]json.RawMessage, name, where string, limit int64) (*int, error) {
	v, ok := present(obj, name)
	if !ok {
		return nil, nil
	}
	n, err := parseInteger(v)
	if err != nil || n < 0 || n > limit {
		return nil, fmt.Errorf("%s: %s %s is not a whole number from 0 to %d", where, name, shortJSON(v), limit)
	}
	c := int(n)
	return &c, nil
}

// parseInteger reads a JSON integer written as one: digits, no fraction or
// exponent, within int64 (ACP's integers are int64).
func parseInteger(raw json.RawMessage) (int64, error) {
	s := string(bytes.TrimSpace(raw))
	if !isJSONNumber(s) || !isIntegerLiteral(s) {
		return 0, errors.New("not a whole number (digits, with no fraction or exponent)")
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, errors.New("outside the 64-bit integers")
	}
	return n, nil
}

// parseNumber reads a JSON number that a double holds (ACP's numbers are
// doubles): 1e400 is refused, not read as infinity.
func parseNumber(raw json.RawMessage) (float64, error) {
	s := string(bytes.TrimSpace(raw))
	if !isJSONNumber(s) {
		return 0, errors.New("not a number")
	}
	x, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(x, 0) {
		return 0, errors.New("outside the range of a double")
	}
	return x, nil
}

// isJSONNumber reports whether s is exactly one JSON number (strconv reads
// more: "0x1p4", "Inf", "1_000", "+1").
func isJSONNumber(s string) bool {
	if s == "" || (s[0] != '-' && (s[0] < '0' || s[0] > '9')) {
		return false
	}
	var n json.Number
	return json.Unmarshal([]byte(s), &n) == nil
}

func isIntegerLiteral(s string) bool {
	s = strings.TrimPrefix(s, "-")
	return s != "" && strings.Trim(s, "0123456789") == ""
}
