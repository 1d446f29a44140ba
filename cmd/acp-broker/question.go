package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/charmbracelet/huh"

	"github.com/acp-broker/acp-broker/elicit"
	"github.com/acp-broker/acp-broker/notify"
)

// The questions an agent asks (elicitation/create), as `acp-broker pending`
// shows them and `acp-broker answer` asks them. Every text here that came
// from the agent (the message, titles, descriptions, choices, the URL) is
// shown made one line by notify.OneLine, so that it cannot draw lines of
// its own nor drive the terminal.

// questionAnswer is a human's answer to a question: an action and, for an
// accepted form, the text typed for each field (several for a
// multi-select), which elicit.Form.Content turns into the content.
type questionAnswer struct {
	action string
	values map[string][]string
}

// describeQuestions writes the questions among pending, one block each,
// after the table of permission requests.
func describeQuestions(w io.Writer, pending []notify.Pending) {
	for _, q := range pending {
		if !q.IsQuestion() {
			continue
		}
		fmt.Fprintln(w)
		form, err := questionForm(q)
		writeQuestion(w, q, form, err)
		switch q.Mode {
		case "url":
			fmt.Fprintf(w, "  answer: acp-broker answer %s --accept (you consent to open the URL yourself) | --decline | --cancel\n", notify.OneLine(q.ID))
		default:
			fmt.Fprintf(w, "  answer: acp-broker answer %s [--field NAME=VALUE ...] | --decline | --cancel\n", notify.OneLine(q.ID))
		}
	}
}

// questionForm reads a form question's schema, once for all that shows or
// asks it; nil in URL mode.
func questionForm(q notify.Pending) (*elicit.Form, error) {
	if q.Mode == "url" {
		return nil, nil
	}
	return elicit.ParseSchema(q.RequestedSchema)
}

// writeQuestion writes what a question asks: who asks, its message, and
// its fields (form, as questionForm read it, or why it could not) or its
// URL, whole.
func writeQuestion(w io.Writer, q notify.Pending, form *elicit.Form, formErr error) {
	writeQuestionHeader(w, q, form)
	if q.Mode == "url" {
		return
	}
	if formErr != nil {
		fmt.Fprintf(w, "  (this form cannot be answered here: %s)\n", notify.OneLine(formErr.Error()))
		return
	}
	for _, f := range form.Fields {
		fmt.Fprintf(w, "  %s\n", fieldSummary(f))
	}
}

// writeQuestionHeader writes who asks a question, its message, the form's
// own title and description (form is nil when there is none to show), or
// the URL, whole.
func writeQuestionHeader(w io.Writer, q notify.Pending, form *elicit.Form) {
	fmt.Fprintf(w, "question %s from %s", notify.OneLine(q.ID), notify.OneLine(q.Agent))
	if q.Session != "" {
		fmt.Fprintf(w, ", session %s", notify.OneLine(q.Session))
	}
	fmt.Fprintf(w, " (%s): %s\n", notify.OneLine(q.Mode), notify.OneLine(q.Message))
	if q.Mode == "url" {
		fmt.Fprintf(w, "  url (host %s): %s\n", notify.OneLine(q.URLHost()), notify.OneLine(q.URL))
		return
	}
	if form != nil && (form.Title != "" || form.Description != "") {
		fmt.Fprintf(w, "  %s\n", notify.OneLine(strings.TrimSpace(form.Title+" "+form.Description)))
	}
}

// fieldSummary says in one line what a field takes: its name and title,
// whether it is required, its type with its choices, format and bounds,
// its default and its description.
func fieldSummary(f elicit.Field) string {
	var b strings.Builder
	b.WriteString(notify.OneLine(f.Name))
	if f.Title != "" && f.Title != f.Name {
		fmt.Fprintf(&b, " (%s)", notify.OneLine(f.Title))
	}
	if f.Required {
		b.WriteString(": required, ")
	} else {
		b.WriteString(": optional, ")
	}
	b.WriteString(fieldType(f))
	if len(f.Default) > 0 {
		fmt.Fprintf(&b, ", default %s", notify.OneLine(string(f.Default)))
	}
	if f.Description != "" {
		fmt.Fprintf(&b, "; %s", notify.OneLine(f.Description))
	}
	return b.String()
}

// fieldType says what values a field takes.
func fieldType(f elicit.Field) string {
	switch f.Type {
	case "boolean":
		return "yes or no"
	case "number", "integer":
		what := "a number"
		if f.Type == "integer" {
			what = "a whole number"
		}
		return what + bounds(f.Minimum, f.Maximum, func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }, "")
	case "array":
		return "any of: " + choiceList(f.Choices) + bounds(intFloat(f.MinItems), intFloat(f.MaxItems), countText, " chosen")
	case "string":
		if len(f.Choices) > 0 {
			return "one of: " + choiceList(f.Choices)
		}
		what := "text"
		switch f.Format {
		case "email":
			what = "an email address"
		case "uri":
			what = "a URI"
		case "date":
			what = "a date (YYYY-MM-DD)"
		case "date-time":
			what = "a date and time (RFC 3339)"
		}
		return what + bounds(intFloat(f.MinLength), intFloat(f.MaxLength), countText, " characters")
	}
	return notify.OneLine(f.Type)
}

// choiceList names the choices: each value, and its title where it differs.
func choiceList(choices []elicit.Choice) string {
	parts := make([]string, len(choices))
	for i, c := range choices {
		parts[i] = notify.OneLine(c.Value)
		if c.Title != "" && c.Title != c.Value {
			parts[i] += " (" + notify.OneLine(c.Title) + ")"
		}
	}
	return strings.Join(parts, ", ")
}

// bounds says a range: " from 1 to 5", " at least 1", " at most 5", or "".
func bounds(lo, hi *float64, format func(float64) string, unit string) string {
	switch {
	case lo != nil && hi != nil:
		return fmt.Sprintf(" (%s to %s%s)", format(*lo), format(*hi), unit)
	case lo != nil:
		return fmt.Sprintf(" (at least %s%s)", format(*lo), unit)
	case hi != nil:
		return fmt.Sprintf(" (at most %s%s)", format(*hi), unit)
	}
	return ""
}

func intFloat(n *int) *float64 {
	if n == nil {
		return nil
	}
	f := float64(*n)
	return &f
}

func countText(v float64) string { return strconv.FormatFloat(v, 'f', 0, 64) }

// errNothingAnswered is a form left without an answer (Ctrl-C, Esc).
var errNothingAnswered = errors.New("nothing was answered")

// askPlain asks a question one line at a time, for input that is not a
// terminal (a pipe, a script): each prompt is a line on w, each answer the
// next line read from r. It asks the action first (accept, decline or
// cancel; for a form, an empty line accepts) and, for an accepted form,
// each field in the schema's order: a choice by its number, value or
// title, a multi-select as several separated by commas, yes or no for a
// boolean, an empty line for an optional field left out. Input that ends
// before every prompt was answered is an error, never an answer. form is
// the question's (questionForm), nil in URL mode.
func askPlain(r *bufio.Reader, w io.Writer, q notify.Pending, form *elicit.Form) (questionAnswer, error) {
	writeQuestionHeader(w, q, form)
	if q.Mode == "url" {
		fmt.Fprintln(w, "The broker never opens or fetches the URL: accepting tells the agent you consent to open it yourself.")
		line, err := promptLine(r, w, "accept, decline or cancel?")
		if err != nil {
			return questionAnswer{}, err
		}
		action, err := readAction(line, "")
		return questionAnswer{action: action}, err
	}
	line, err := promptLine(r, w, "accept, decline or cancel? (an empty line accepts)")
	if err != nil {
		return questionAnswer{}, err
	}
	action, err := readAction(line, "accept")
	if err != nil || action != "accept" {
		return questionAnswer{action: action}, err
	}
	values := map[string][]string{}
	for _, f := range form.Fields {
		var prompt strings.Builder
		prompt.WriteString(fieldSummary(f))
		for i, c := range f.Choices {
			fmt.Fprintf(&prompt, "\n  %d) %s", i+1, choiceText(c))
		}
		line, err := promptLine(r, w, prompt.String())
		if err != nil {
			return questionAnswer{}, err
		}
		if v := plainValues(f, line); len(v) > 0 {
			values[f.Name] = v
		}
	}
	return questionAnswer{action: "accept", values: values}, nil
}

// promptLine writes prompt, its own lines (the answer is not echoed when
// it comes from a pipe), and reads the answer's line.
func promptLine(r *bufio.Reader, w io.Writer, prompt string) (string, error) {
	fmt.Fprintln(w, prompt)
	line, err := r.ReadString('\n')
	switch {
	case err == io.EOF && line == "":
		first, _, _ := strings.Cut(prompt, "\n")
		return "", fmt.Errorf("the input ended before this was answered: %s: %w", first, errNothingAnswered)
	case err != nil && err != io.EOF:
		return "", err
	}
	return strings.TrimSpace(line), nil
}

// readAction reads a typed action, or takes def for an empty line.
func readAction(line, def string) (string, error) {
	switch strings.ToLower(line) {
	case "":
		if def != "" {
			return def, nil
		}
	case "accept", "a":
		return "accept", nil
	case "decline", "d":
		return "decline", nil
	case "cancel", "c":
		return "cancel", nil
	}
	return "", fmt.Errorf("%q is not an action: answer accept, decline or cancel", notify.OneLine(line))
}

// plainValues reads a typed line as a field's values: nothing for an
// empty line, a choice's value for its number, one value per comma for a
// multi-select; elicit.Form.Content reads the rest.
func plainValues(f elicit.Field, line string) []string {
	if line == "" {
		return nil
	}
	parts := []string{line}
	if f.Type == "array" {
		parts = strings.Split(line, ",")
	}
	var out []string
	for _, p := range parts {
		p = strings.TrimSpace(p)
		named := slices.ContainsFunc(f.Choices, func(c elicit.Choice) bool { return c.Value == p || c.Title == p })
		if n, err := strconv.Atoi(p); err == nil && !named && n >= 1 && n <= len(f.Choices) {
			p = f.Choices[n-1].Value
		}
		if f.Type == "boolean" {
			switch strings.ToLower(p) {
			case "y":
				p = "yes"
			case "n":
				p = "no"
			}
		}
		if p != "" {
			out = append(out, p)
		}
	}
	return out
}

// defaultText is a field's default as it is typed: a string's text, a
// number or a boolean as written; "" for none (or an array's).
func defaultText(f elicit.Field) string {
	var text string
	if json.Unmarshal(f.Default, &text) == nil {
		return text
	}
	if f.Type == "array" {
		return ""
	}
	return string(bytes.TrimSpace(f.Default))
}

// choiceText is how a choice is listed: its title and, where it differs,
// its value.
func choiceText(c elicit.Choice) string {
	if c.Title == "" || c.Title == c.Value {
		return notify.OneLine(c.Value)
	}
	return notify.OneLine(c.Title) + " [" + notify.OneLine(c.Value) + "]"
}

// askTerminal asks a question with a form on the terminal: the action to
// take (answer, decline, cancel), then, to answer, each field: a list to
// pick from for choices (several for a multi-select), yes or no for a
// boolean, a line of text otherwise, each checked as it is filled in. form
// is the question's (questionForm), nil in URL mode.
func askTerminal(ctx context.Context, in io.Reader, out io.Writer, q notify.Pending, form *elicit.Form) (questionAnswer, error) {
	// The header stays above the form, and the URL is printed whole where
	// it can be copied.
	writeQuestion(out, q, form, nil)
	action := "accept"
	first := huh.NewSelect[string]().Title(notify.OneLine(q.Message)).Value(&action)
	groups := []*huh.Group{huh.NewGroup(first)}
	var collect []func(map[string][]string)
	if q.Mode == "url" {
		first.Description("The broker never opens or fetches the URL: accepting tells the agent you consent to open it yourself.").
			Options(huh.NewOption("Accept: I will open the URL", "accept"), huh.NewOption("Decline", "decline"), huh.NewOption("Cancel", "cancel"))
	} else {
		first.Options(huh.NewOption("Answer", "accept"), huh.NewOption("Decline", "decline"), huh.NewOption("Cancel", "cancel"))
		var fields []huh.Field
		for _, f := range form.Fields {
			field, get := terminalField(f)
			fields = append(fields, field)
			collect = append(collect, get)
		}
		if len(fields) > 0 {
			groups = append(groups, huh.NewGroup(fields...).WithHideFunc(func() bool { return action != "accept" }))
		}
	}
	err := huh.NewForm(groups...).WithInput(in).WithOutput(out).RunWithContext(ctx)
	if errors.Is(err, huh.ErrUserAborted) {
		return questionAnswer{}, errNothingAnswered
	}
	if err != nil {
		return questionAnswer{}, err
	}
	if action != "accept" || q.Mode == "url" {
		return questionAnswer{action: action}, nil
	}
	values := map[string][]string{}
	for _, get := range collect {
		get(values)
	}
	return questionAnswer{action: "accept", values: values}, nil
}

// terminalField makes the form's field for f, and the function that adds
// what was filled in to the values. Each is checked alone, as the whole
// content will be. A field the schema gives a default starts filled in (or
// picked) with it: elicit keeps only a default that is a valid value.
func terminalField(f elicit.Field) (huh.Field, func(map[string][]string)) {
	alone := &elicit.Form{Fields: []elicit.Field{f}}
	check := func(values []string) error {
		v := map[string][]string{}
		if len(values) > 0 {
			v[f.Name] = values
		}
		_, err := alone.Content(v)
		return err
	}
	title := notify.OneLine(f.Name)
	if f.Title != "" {
		title = notify.OneLine(f.Title)
	}
	if !f.Required {
		title += " (optional)"
	}
	description := fieldType(f)
	if f.Description != "" {
		description = notify.OneLine(f.Description) + "\n" + description
	}
	put := func(values map[string][]string, v []string) {
		if len(v) > 0 {
			values[f.Name] = v
		}
	}
	switch {
	case f.Type == "array":
		var picked []int
		var defaults []string
		_ = json.Unmarshal(f.Default, &defaults) // none when there is no default
		for i, c := range f.Choices {
			if slices.Contains(defaults, c.Value) {
				picked = append(picked, i)
			}
		}
		options := make([]huh.Option[int], len(f.Choices))
		for i, c := range f.Choices {
			options[i] = huh.NewOption(choiceText(c), i)
		}
		chosen := func() []string {
			v := make([]string, len(picked))
			for i, n := range picked {
				v[i] = f.Choices[n].Value
			}
			return v
		}
		field := huh.NewMultiSelect[int]().Title(title).Description(description).Options(options...).Value(&picked).
			Validate(func([]int) error { return check(chosen()) })
		if f.MaxItems != nil && *f.MaxItems > 0 {
			field.Limit(*f.MaxItems)
		}
		return field, func(values map[string][]string) { put(values, chosen()) }
	case len(f.Choices) > 0:
		picked := -1
		if len(f.Default) > 0 {
			def := defaultText(f)
			picked = slices.IndexFunc(f.Choices, func(c elicit.Choice) bool { return c.Value == def })
		}
		var options []huh.Option[int]
		if !f.Required {
			options = append(options, huh.NewOption("(no answer)", -1))
		}
		for i, c := range f.Choices {
			options = append(options, huh.NewOption(choiceText(c), i))
		}
		chosen := func() []string {
			if picked < 0 {
				return nil
			}
			return []string{f.Choices[picked].Value}
		}
		field := huh.NewSelect[int]().Title(title).Description(description).Options(options...).Value(&picked).
			Validate(func(int) error { return check(chosen()) })
		return field, func(values map[string][]string) { put(values, chosen()) }
	case f.Type == "boolean" && f.Required:
		yes := defaultText(f) == "true"
		field := huh.NewConfirm().Title(title).Description(description).Affirmative("Yes").Negative("No").Value(&yes)
		return field, func(values map[string][]string) { put(values, []string{strconv.FormatBool(yes)}) }
	case f.Type == "boolean":
		answer := defaultText(f)
		field := huh.NewSelect[string]().Title(title).Description(description).
			Options(huh.NewOption("(no answer)", ""), huh.NewOption("Yes", "true"), huh.NewOption("No", "false")).Value(&answer)
		return field, func(values map[string][]string) { put(values, plainValues(f, answer)) }
	}
	text := defaultText(f)
	field := huh.NewInput().Title(title).Description(description).Value(&text).
		Validate(func(s string) error { return check(plainValues(f, s)) })
	return field, func(values map[string][]string) { put(values, plainValues(f, text)) }
}
