package elicit

import (
	"encoding/json"
	"math"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf16"
	"unicode/utf8"
)

// FuzzValidate checks that Validate never accepts content that a plain
// reading of it, with encoding/json, would reject.
func FuzzValidate(f *testing.F) {
	for _, seed := range []string{
		`{"target":"staging","replicas":3}`,
		`{"target":"production","notes":"héllo","replicas":9,"ratio":2.5,"confirm":true,"regions":["eu","ap"],"tags":[],"color":"red","mail":"a@b.c","site":"https://x/","day":"2026-02-28","at":"2026-12-01T17:30:00Z"}`,
		`{"target":"staging","replicas":1,"target":"production"}`,
		`{"target":"staging","replicas":1,"Target":"x"}`,
		`{"target":"staging","replicas":1e0}`,
		`{"target":"staging","replicas":1,"ratio":1e400}`,
		`{"target":"staging","replicas":1,"ratio":-0}`,
		`{"target":"staging","replicas":1,"regions":["eu","eu"]}`,
		`{"target":"\u0073taging","replicas":1}`,
		`{"target":"staging","replicas":1,"notes":"\ud800"}`,
		`{"target":"staging","replicas":1,"\ud800":1}`,
		"{\"target\":\"staging\",\"replicas\":1,\"notes\":\"\xed\xa0\x80\"}",
		`[1]`, `null`, `{"a":{"b":1}}`,
	} {
		f.Add(seed)
	}
	form := mustForm(f, deploySchema)
	f.Fuzz(func(t *testing.T, content string) {
		if form.Validate(json.RawMessage(content)) != nil {
			return
		}
		if problem := plainReading(form, content); problem != "" {
			t.Fatalf("Validate accepted %q, which a plain reading rejects: %s", content, problem)
		}
	})
}

// FuzzParseSchema checks that no schema makes ParseSchema or Validate
// panic, and that a form read from any schema accepts only content a plain
// reading accepts.
func FuzzParseSchema(f *testing.F) {
	f.Add(deploySchema, `{"target":"staging","replicas":3}`)
	f.Add(`{"properties":{"n":{"type":"integer","minimum":-9223372036854775808,"maximum":9223372036854775807}}}`, `{"n":9223372036854775807}`)
	f.Add(`{"properties":{"n":{"type":"number","minimum":1e308}}}`, `{"n":1.7976931348623157e308}`)
	f.Add(`{"properties":{"s":{"type":"string","maxLength":0}},"required":["s"]}`, `{"s":""}`)
	f.Add(`{"properties":{"m":{"type":"array","maxItems":0,"items":{"enum":["x"]}}}}`, `{"m":[]}`)
	f.Add(`{"properties":{"c":{"type":"string","enum":["ok","toolong"],"maxLength":2}}}`, `{"c":"toolong"}`)
	f.Add(`{"properties":{"c":{"type":"string","oneOf":[{"const":"a","title":"A"}],"minLength":2}}}`, `{"c":"a"}`)
	f.Add(`{"properties":{"c":{"type":"string","enum":["\ud800"]}}}`, `{"c":"\ufffd"}`)
	f.Add(`{"properties":{"\ud800":{"type":"boolean"}}}`, `{"\ufffd":true}`)
	f.Add(`{"properties":{"\ufffd":{"type":"boolean"}},"required":["\udc00"]}`, `{"\ufffd":true}`)
	f.Add(`{"properties":{"c":{"type":"string","enum":["\ufffd"]}}}`, `{"c":"\ud800"}`)
	f.Add(`{"properties":{"\ufffd":{"type":"boolean"}}}`, "{\"\xff\":true}")
	f.Fuzz(func(t *testing.T, schema, content string) {
		form, err := ParseSchema(json.RawMessage(schema))
		if err != nil {
			return
		}
		if problem := inexactString(schema); problem != "" {
			t.Fatalf("ParseSchema accepted %q, whose strings are not exact Unicode: %s", schema, problem)
		}
		if form.Validate(json.RawMessage(content)) != nil {
			return
		}
		if problem := plainReading(form, content); problem != "" {
			t.Fatalf("schema %q: Validate accepted %q, which a plain reading rejects: %s", schema, content, problem)
		}
	})
}

// plainReading checks content against the form the straightforward way,
// without the package's own code, and says what is wrong ("" for nothing).
func plainReading(form *Form, content string) string {
	if problem := inexactString(content); problem != "" {
		return problem
	}
	dec := json.NewDecoder(strings.NewReader(content))
	dec.UseNumber()
	var obj map[string]any
	if err := dec.Decode(&obj); err != nil || obj == nil {
		return "not a JSON object"
	}
	if dec.More() {
		return "data after the object"
	}
	for name := range obj {
		if !slices.ContainsFunc(form.Fields, func(f Field) bool { return f.Name == name }) {
			return "extra field " + name
		}
	}
	for _, f := range form.Fields {
		v, ok := obj[f.Name]
		if !ok {
			if f.Required {
				return "missing " + f.Name
			}
			continue
		}
		if problem := plainField(f, v); problem != "" {
			return f.Name + ": " + problem
		}
	}
	return ""
}

func plainField(f Field, v any) string {
	in := func(s string) bool {
		return slices.ContainsFunc(f.Choices, func(c Choice) bool { return c.Value == s })
	}
	switch f.Type {
	case "string":
		s, ok := v.(string)
		if !ok {
			return "not a string"
		}
		if f.Choices != nil && !in(s) {
			return "not a choice"
		}
		n := utf8.RuneCountInString(s)
		if f.MinLength != nil && n < *f.MinLength || f.MaxLength != nil && n > *f.MaxLength {
			return "length"
		}
		switch f.Format {
		case "email":
			if strings.Count(s, "@") < 1 {
				return "no @"
			}
		case "uri":
			if u, err := url.Parse(s); err != nil || u.Scheme == "" || strings.ContainsAny(s, " \n") {
				return "not a URI"
			}
		case "date":
			if _, err := time.Parse("2006-01-02", s); err != nil {
				return "not a date"
			}
		case "date-time":
			if _, err := time.Parse(time.RFC3339, s); err != nil {
				return "not a date-time"
			}
		}
	case "integer":
		n, ok := v.(json.Number)
		if !ok {
			return "not a number"
		}
		i, err := strconv.ParseInt(string(n), 10, 64)
		if err != nil {
			return "not an int64"
		}
		if f.Minimum != nil && float64(i) < *f.Minimum || f.Maximum != nil && float64(i) > *f.Maximum {
			return "out of bounds"
		}
	case "number":
		n, ok := v.(json.Number)
		if !ok {
			return "not a number"
		}
		x, err := n.Float64()
		if err != nil || math.IsInf(x, 0) || math.IsNaN(x) {
			return "not a double"
		}
		if f.Minimum != nil && x < *f.Minimum || f.Maximum != nil && x > *f.Maximum {
			return "out of bounds"
		}
	case "boolean":
		if _, ok := v.(bool); !ok {
			return "not a boolean"
		}
	case "array":
		items, ok := v.([]any)
		if !ok {
			return "not a list"
		}
		seen := map[string]bool{}
		for _, item := range items {
			s, ok := item.(string)
			if !ok || !in(s) || seen[s] {
				return "bad item"
			}
			seen[s] = true
		}
		if f.MinItems != nil && len(items) < *f.MinItems || f.MaxItems != nil && len(items) > *f.MaxItems {
			return "count"
		}
	default:
		return "unknown type " + f.Type
	}
	return ""
}

var (
	jsonStringLiteral = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	jsonEscape        = regexp.MustCompile(`\\(?:u([0-9a-fA-F]{4})|.)`)
)

// inexactString says which string of a JSON text a JavaScript reader
// would not read as Go does ("" for none): invalid UTF-8, or a \u escape
// of a UTF-16 surrogate that is not a high one followed by a low one.
func inexactString(text string) string {
	if !utf8.ValidString(text) {
		return "invalid UTF-8"
	}
	for _, lit := range jsonStringLiteral.FindAllString(text, -1) {
		// Each escape's UTF-16 unit (-1 for a non-\u escape) and where
		// it starts and ends: a pair is a high unit that ends where a low
		// one starts.
		escapes := jsonEscape.FindAllStringSubmatchIndex(lit, -1)
		unit := func(k int) rune {
			if k >= len(escapes) || escapes[k][2] < 0 {
				return -1
			}
			n, _ := strconv.ParseUint(lit[escapes[k][2]:escapes[k][3]], 16, 16)
			return rune(n)
		}
		for k := 0; k < len(escapes); k++ {
			switch u := unit(k); {
			case !utf16.IsSurrogate(u):
			case u < 0xdc00 && k+1 < len(escapes) && escapes[k+1][0] == escapes[k][1] && unit(k+1) >= 0xdc00 && unit(k+1) <= 0xdfff:
				k++
			default:
				return "a lone surrogate in " + lit
			}
		}
	}
	return ""
}
