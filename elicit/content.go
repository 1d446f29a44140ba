package elicit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Content builds an answer's content from the text a human typed for each
// field, by field name: one value for a field, one per pick for a
// multi-select; "true"/"false"/"yes"/"no" (any case) for a boolean; for a
// choice, its value or its title. A field not in values is left out (the
// human skipped it). The content is then checked with Validate, so what
// Content returns is always a valid answer.
func (f *Form) Content(values map[string][]string) (json.RawMessage, error) {
	for name := range values {
		if !slices.ContainsFunc(f.Fields, func(fl Field) bool { return fl.Name == name }) {
			return nil, &FieldError{name, "the form has no such field"}
		}
	}
	var b bytes.Buffer
	b.WriteByte('{')
	for i := range f.Fields {
		field := &f.Fields[i]
		typed, ok := values[field.Name]
		if !ok {
			continue
		}
		v, err := field.value(typed)
		if err != nil {
			return nil, &FieldError{field.Name, err.Error()}
		}
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		name, _ := json.Marshal(field.Name)
		b.Write(name)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	content := json.RawMessage(b.Bytes())
	if err := f.Validate(content); err != nil {
		return nil, err
	}
	return content, nil
}

// value turns what the human typed for the field into its JSON value.
func (f *Field) value(typed []string) (json.RawMessage, error) {
	if f.Type == "array" {
		picks := make([]string, 0, len(typed))
		for _, t := range typed {
			c, err := f.choose(t)
			if err != nil {
				return nil, err
			}
			picks = append(picks, c)
		}
		return json.Marshal(picks)
	}
	if len(typed) != 1 {
		return nil, fmt.Errorf("one value expected, got %d", len(typed))
	}
	t := typed[0]
	switch f.Type {
	case "string":
		if f.Choices != nil {
			c, err := f.choose(t)
			if err != nil {
				return nil, err
			}
			t = c
		}
		return json.Marshal(t)
	case "integer":
		s := strings.TrimSpace(t)
		n, err := parseInteger(json.RawMessage(s))
		if err != nil {
			return nil, fmt.Errorf("%q is not an integer: %w", t, err)
		}
		return json.RawMessage(strconv.FormatInt(n, 10)), nil
	case "number":
		s := strings.TrimSpace(t)
		if _, err := parseNumber(json.RawMessage(s)); err != nil {
			return nil, fmt.Errorf("%q is not a number: %w", t, err)
		}
		return json.RawMessage(s), nil
	case "boolean":
		switch strings.ToLower(strings.TrimSpace(t)) {
		case "true", "yes":
			return json.RawMessage("true"), nil
		case "false", "no":
			return json.RawMessage("false"), nil
		}
		return nil, fmt.Errorf("%q is not true, false, yes or no", t)
	}
	return nil, fmt.Errorf("type %q cannot be answered", f.Type)
}

// choose finds the choice the human meant: its value, or else its title
// when exactly one choice has it. Text that is one choice's value and
// another's title is refused: which of them was meant is unknown, and a
// hostile schema could title a choice with the value of another to turn a
// pick into its own.
func (f *Field) choose(typed string) (string, error) {
	var titled []string
	for _, c := range f.Choices {
		if c.Title != "" && c.Title == typed && c.Value != typed {
			titled = append(titled, c.Value)
		}
	}
	switch {
	case f.offers(typed) && len(titled) > 0:
		return "", fmt.Errorf("%q is the value of one choice and the title of another (value %q): which is meant is unclear", typed, titled[0])
	case f.offers(typed):
		return typed, nil
	case len(titled) == 1:
		return titled[0], nil
	case len(titled) == 0:
		return "", fmt.Errorf("%q is not one of %s", typed, f.choiceList())
	}
	return "", fmt.Errorf("%q is the title of %d choices: give the value (%s)", typed, len(titled), f.choiceList())
}
