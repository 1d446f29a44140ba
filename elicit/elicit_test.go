package elicit

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// deploySchema is the seed example: a titled choice and free text, with
// every other property type beside them.
const deploySchema = `{
  "type": "object",
  "title": "Deploy",
  "properties": {
    "target": {"type": "string", "title": "Target", "oneOf": [
      {"const": "staging", "title": "Staging"},
      {"const": "production", "title": "Production", "description": "live"}]},
    "notes": {"type": "string", "title": "Anything else?", "maxLength": 5, "minLength": 1},
    "replicas": {"type": "integer", "minimum": 1, "maximum": 9},
    "ratio": {"type": "number", "minimum": -0.5, "maximum": 2.5},
    "confirm": {"type": "boolean", "default": false},
    "regions": {"type": "array", "minItems": 1, "maxItems": 2,
      "items": {"anyOf": [{"const": "eu", "title": "Europe"}, {"const": "us", "title": "America"}, {"const": "ap", "title": "Asia"}]}},
    "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}},
    "color": {"type": "string", "enum": ["red", "green"]},
    "mail": {"type": "string", "format": "email"},
    "site": {"type": "string", "format": "uri"},
    "day": {"type": "string", "format": "date"},
    "at": {"type": "string", "format": "date-time"}
  },
  "required": ["target", "replicas"]
}`

func mustForm(t testing.TB, schema string) *Form {
	t.Helper()
	form, err := ParseSchema(json.RawMessage(schema))
	if err != nil {
		t.Fatalf("ParseSchema: %v", err)
	}
	return form
}

func TestParseSchemaReadsEveryPropertyType(t *testing.T) {
	form := mustForm(t, deploySchema)
	if form.Title != "Deploy" {
		t.Errorf("title %q", form.Title)
	}
	var names []string
	for _, f := range form.Fields {
		names = append(names, f.Name)
	}
	if got, want := strings.Join(names, " "), "target notes replicas ratio confirm regions tags color mail site day at"; got != want {
		t.Fatalf("fields in order %q, want %q", got, want)
	}
	target := form.Fields[0]
	if !target.Required || target.Type != "string" || len(target.Choices) != 2 ||
		target.Choices[1] != (Choice{Value: "production", Title: "Production", Description: "live"}) {
		t.Errorf("target: %+v", target)
	}
	if f := form.Fields[1]; f.Required || *f.MinLength != 1 || *f.MaxLength != 5 || f.Title != "Anything else?" {
		t.Errorf("notes: %+v", f)
	}
	if f := form.Fields[2]; !f.Required || f.Type != "integer" || *f.Minimum != 1 || *f.Maximum != 9 {
		t.Errorf("replicas: %+v", f)
	}
	if f := form.Fields[4]; string(f.Default) != "false" {
		t.Errorf("confirm default %q", f.Default)
	}
	if f := form.Fields[5]; f.Type != "array" || *f.MinItems != 1 || *f.MaxItems != 2 || len(f.Choices) != 3 || f.Choices[2].Label() != "Asia" {
		t.Errorf("regions: %+v", f)
	}
	if f := form.Fields[6]; len(f.Choices) != 2 || f.Choices[0].Label() != "a" {
		t.Errorf("tags: %+v", f)
	}
	if f := form.Fields[10]; f.Format != "date" {
		t.Errorf("day: %+v", f)
	}
}

func TestParseSchemaRefusesWhatItCannotCheck(t *testing.T) {
	for _, tc := range []struct{ name, schema, want string }{
		{"not an object", `[]`, "not a JSON object"},
		{"repeated member", `{"properties": {"a": {"type": "string"}, "a": {"type": "number"}}}`, "requestedSchema"},
		{"case variant", `{"properties": {"a": {"type": "string"}, "A": {"type": "string"}}}`, "requestedSchema"},
		{"top type", `{"type": "array"}`, `not "object"`},
		{"unknown type", `{"properties": {"a": {"type": "object"}}}`, `field "a": type "object"`},
		{"type list", `{"properties": {"a": {"type": ["string", "null"]}}}`, `field "a": type`},
		{"no type", `{"properties": {"a": {"title": "x"}}}`, `type (none)`},
		{"pattern", `{"properties": {"a": {"type": "string", "pattern": "^a$"}}}`, "pattern"},
		{"unknown keyword", `{"properties": {"a": {"type": "number", "multipleOf": 2}}}`, `"multipleOf"`},
		{"string keyword on a number", `{"properties": {"a": {"type": "number", "maxLength": 2}}}`, `"maxLength"`},
		{"unknown top keyword", `{"properties": {}, "allOf": []}`, `"allOf"`},
		{"additional properties", `{"properties": {}, "additionalProperties": true}`, "additionalProperties"},
		{"unknown format", `{"properties": {"a": {"type": "string", "format": "ipv4"}}}`, `format "ipv4"`},
		{"lengths crossed", `{"properties": {"a": {"type": "string", "minLength": 3, "maxLength": 2}}}`, "above maxLength"},
		{"negative length", `{"properties": {"a": {"type": "string", "minLength": -1}}}`, "minLength -1"},
		{"fractional length", `{"properties": {"a": {"type": "string", "maxLength": 1.5}}}`, "maxLength 1.5"},
		{"bounds crossed", `{"properties": {"a": {"type": "number", "minimum": 3, "maximum": 2}}}`, "above maximum"},
		{"integer bounds crossed", `{"properties": {"a": {"type": "integer", "minimum": 3, "maximum": 2}}}`, "above maximum"},
		{"fractional integer bound", `{"properties": {"a": {"type": "integer", "minimum": 0.5}}}`, "minimum 0.5"},
		{"huge number bound", `{"properties": {"a": {"type": "number", "maximum": 1e400}}}`, "range of a double"},
		{"string bound", `{"properties": {"a": {"type": "number", "maximum": "9"}}}`, "maximum"},
		{"items crossed", `{"properties": {"a": {"type": "array", "minItems": 2, "maxItems": 1, "items": {"enum": ["x"]}}}}`, "above maxItems"},
		{"no items", `{"properties": {"a": {"type": "array"}}}`, "without items"},
		{"free items", `{"properties": {"a": {"type": "array", "items": {"type": "string"}}}}`, "exactly one of enum or anyOf"},
		{"number items", `{"properties": {"a": {"type": "array", "items": {"type": "number", "enum": [1]}}}}`, `not "string"`},
		{"empty enum", `{"properties": {"a": {"type": "string", "enum": []}}}`, "no choices"},
		{"repeated choice", `{"properties": {"a": {"type": "string", "enum": ["x", "x"]}}}`, "offered twice"},
		{"enum and oneOf", `{"properties": {"a": {"type": "string", "enum": ["x"], "oneOf": [{"const": "x", "title": "X"}]}}}`, "both enum and oneOf"},
		{"oneOf without title", `{"properties": {"a": {"type": "string", "oneOf": [{"const": "x"}]}}}`, "title is not a string"},
		{"oneOf const not string", `{"properties": {"a": {"type": "string", "oneOf": [{"const": 1, "title": "one"}]}}}`, "const is not a string"},
		{"enum of numbers", `{"properties": {"a": {"type": "string", "enum": [1, 2]}}}`, "not a list of strings"},
		{"enumNames mismatch", `{"properties": {"a": {"type": "string", "enum": ["x"], "enumNames": ["X", "Y"]}}}`, "enumNames"},
		{"required unknown", `{"properties": {"a": {"type": "string"}}, "required": ["b"]}`, `"b" is not among`},
		{"required not a list", `{"properties": {}, "required": "a"}`, "required is not a list"},
		{"trailing data", `{"properties": {}} {}`, "requestedSchema"},
		{"property not an object", `{"properties": {"a": "string"}}`, `field "a"`},
		// Go reads each of these strings as U+FFFD, a JavaScript agent
		// as a lone surrogate or refuses it: the broker's form would not be
		// the agent's.
		{"lone surrogate enum value", `{"properties": {"c": {"type": "string", "enum": ["\ud800"]}}}`, "not valid Unicode"},
		{"lone surrogate const", `{"properties": {"c": {"type": "string", "oneOf": [{"const": "\udc00", "title": "x"}]}}}`, "not valid Unicode"},
		{"lone surrogate items", `{"properties": {"c": {"type": "array", "items": {"enum": ["a\ud83d"]}}}}`, "not valid Unicode"},
		{"lone surrogate property name", `{"properties": {"\ud800": {"type": "string"}}}`, "not valid Unicode"},
		{"lone surrogate required", `{"properties": {"\ufffd": {"type": "string"}}, "required": ["\ud800"]}`, "not valid Unicode"},
		{"lone surrogate title", `{"title": "\ud800", "properties": {}}`, "not valid Unicode"},
		{"invalid UTF-8 enum value", "{\"properties\": {\"c\": {\"type\": \"string\", \"enum\": [\"\xff\"]}}}", "not valid Unicode"},
		{"invalid UTF-8 in an unread member", "{\"properties\": {}, \"_meta\": {\"\xed\xa0\x80\": 1}}", "not valid Unicode"},
		{"enum and maxLength", `{"properties": {"a": {"type": "string", "enum": ["ok", "toolong"], "maxLength": 2}}}`, "both choices and a length"},
		{"oneOf and minLength", `{"properties": {"a": {"type": "string", "oneOf": [{"const": "x", "title": "X"}], "minLength": 3}}}`, "both choices and a length"},
		{"too many properties", manyProperties(maxFields + 1), "more than the 100"},
		{"too many choices", manyChoices(`"type": "string", "enum"`, maxChoices+1), "more than the 1000"},
		{"too many picks", manyChoices(`"type": "array", "items": {"enum"`, maxChoices+1) + "}", "more than the 1000"},
		{"very many choices", manyChoices(`"type": "string", "enum"`, 40000), "more than the 1000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseSchema(json.RawMessage(tc.schema))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("ParseSchema(%s) = %v, want an error containing %q", tc.schema, err, tc.want)
			}
		})
	}
}

func TestParseSchemaAcceptsWhatAgentsSend(t *testing.T) {
	for _, schema := range []string{
		`{}`,
		`{"type": "object", "properties": {}}`,
		`{"type": "object", "title": null, "description": null, "required": null, "properties": null, "_meta": {"x": 1}}`,
		// claude-agent-acp's AskUserQuestion form.
		`{"type":"object","properties":{"question_0":{"type":"string","title":"Target","oneOf":[{"const":"Staging","title":"Staging","description":"safe"},{"const":"Production","title":"Production"}]},"question_0_custom":{"type":"string","title":"Other"}}}`,
		// An MCP server's zod-to-json-schema output.
		`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","additionalProperties":false,"properties":{"n":{"type":"number","minimum":null}},"required":["n"]}`,
		// MCP's older titled enum.
		`{"properties":{"c":{"type":"string","enum":["r","g"],"enumNames":["Red","Green"]}}}`,
		`{"properties":{"m":{"type":"array","uniqueItems":true,"items":{"type":"string","enum":["x"]}}}}`,
	} {
		if _, err := ParseSchema(json.RawMessage(schema)); err != nil {
			t.Errorf("ParseSchema(%s): %v", schema, err)
		}
	}
	form := mustForm(t, `{"properties":{"c":{"type":"string","enum":["r","g"],"enumNames":["Red","Green"]}}}`)
	if got := form.Fields[0].Choices[1]; got != (Choice{Value: "g", Title: "Green"}) {
		t.Errorf("enumNames choice %+v", got)
	}
}

// Titles and descriptions only describe: one that is not a string counts
// as none, as ACP reads them.
func TestParseSchemaDropsAnInvalidAnnotation(t *testing.T) {
	form := mustForm(t, `{"title":{"x":1},"description":7,"properties":{"a":{"type":"string","title":3,"description":["d"],"oneOf":[{"const":"v","title":"V","description":false}]}}}`)
	if form.Title != "" || form.Description != "" || form.Fields[0].Title != "" || form.Fields[0].Description != "" || form.Fields[0].Choices[0] != (Choice{Value: "v", Title: "V"}) {
		t.Errorf("form %+v", form)
	}
}

func TestParseSchemaDropsAnInvalidDefault(t *testing.T) {
	form := mustForm(t, `{"properties":{"n":{"type":"integer","maximum":3,"default":7},"c":{"type":"string","enum":["a"],"default":"b"},"ok":{"type":"string","default":"x"}}}`)
	if form.Fields[0].Default != nil || form.Fields[1].Default != nil {
		t.Errorf("invalid defaults kept: %q %q", form.Fields[0].Default, form.Fields[1].Default)
	}
	if string(form.Fields[2].Default) != `"x"` {
		t.Errorf("valid default dropped: %q", form.Fields[2].Default)
	}
}

func TestValidate(t *testing.T) {
	form := mustForm(t, deploySchema)
	for _, tc := range []struct {
		name, content string
		want          string // "" when valid; else what the error must say
	}{
		{"required only", `{"target":"staging","replicas":3}`, ""},
		{"everything", `{"target":"production","notes":"héllo","replicas":9,"ratio":2.5,"confirm":true,
			"regions":["eu","ap"],"tags":[],"color":"red","mail":"a.b@example.com","site":"https://example.com/a?b=c#d",
			"day":"2026-02-28","at":"2026-12-01T17:30:00.5+01:00"}`, ""},
		{"whitespace around", " \n{ \"target\" : \"staging\" , \"replicas\" : 1 }\n", ""},
		{"minus zero number", `{"target":"staging","replicas":1,"ratio":-0}`, ""},
		{"formats at their plainest", `{"target":"staging","replicas":1,"mail":"x!#$%&'*+-/=?^_{|}~.y@a-b.example.org","site":"urn:isbn:0451450523","day":"2024-02-29","at":"2026-12-01T17:30:00-23:59"}`, ""},
		{"uri with an IP literal", `{"target":"staging","replicas":1,"site":"http://[::1]:8080/a?b#c"}`, ""},
		{"number at its lower bound", `{"target":"staging","replicas":1,"confirm":false,"ratio":-0.5}`, ""},

		{"escaped surrogate pair", `{"target":"staging","replicas":1,"notes":"\ud83d\ude00"}`, ""},
		{"escapes", `{"t\u0061rget":"st\u0061ging","replicas":1,"notes":"\"\\\/\n"}`, ""},

		{"lone high surrogate", `{"target":"staging","replicas":1,"notes":"\ud83d"}`, "lone surrogate"},
		{"lone high surrogate before text", `{"target":"staging","replicas":1,"notes":"\ud83dabcdef"}`, "lone surrogate"},
		{"lone low surrogate", `{"target":"staging","replicas":1,"notes":"\ude00"}`, "lone surrogate"},
		{"two high surrogates", `{"target":"staging","replicas":1,"notes":"\ud83d\ud83d"}`, "lone surrogate"},
		{"invalid UTF-8", "{\"target\":\"staging\",\"replicas\":1,\"notes\":\"\xff\"}", "invalid UTF-8"},
		{"invalid UTF-8 choice", "{\"target\":\"staging\xff\",\"replicas\":1}", "invalid UTF-8"},
		{"not an object", `["target"]`, "not a JSON object"},
		{"null", `null`, "not a JSON object"},
		{"string", `"x"`, "not a JSON object"},
		{"empty", ``, "content"},
		{"trailing data", `{"target":"staging","replicas":1} {}`, "content"},
		{"invalid JSON", `{"target":"staging","replicas":1,}`, "content"},
		{"repeated member", `{"target":"staging","replicas":1,"target":"production"}`, "content"},
		{"case-variant member", `{"target":"staging","replicas":1,"Target":"production"}`, "content"},
		{"nested repeated member", `{"target":"staging","replicas":1,"regions":[{"a":1,"a":2}]}`, "content"},
		{"missing required", `{"target":"staging"}`, `"replicas": required`},
		{"extra field", `{"target":"staging","replicas":1,"admin":true}`, `"admin": the form has no such field`},
		{"choice not offered", `{"target":"prod","replicas":1}`, `"target": "prod" is not one of "staging", "production"`},
		{"choice by title is not a value", `{"target":"Staging","replicas":1}`, `"target"`},
		{"null value", `{"target":null,"replicas":1}`, `"target": expected a string`},
		{"number for string", `{"target":1,"replicas":1}`, `"target": expected a string`},
		{"nested object", `{"target":{"const":"staging"},"replicas":1}`, `"target": expected a string`},
		{"too short", `{"target":"staging","replicas":1,"notes":""}`, "0 characters, at least 1"},
		{"too long in characters", `{"target":"staging","replicas":1,"notes":"héllo!"}`, "6 characters, at most 5"},
		{"integer with fraction", `{"target":"staging","replicas":1.0}`, `"replicas": expected an integer`},
		{"integer with exponent", `{"target":"staging","replicas":1e0}`, `"replicas": expected an integer`},
		{"integer as string", `{"target":"staging","replicas":"3"}`, `"replicas": expected an integer`},
		{"huge integer", `{"target":"staging","replicas":99999999999999999999}`, "64-bit"},
		{"integer below", `{"target":"staging","replicas":0}`, "below the minimum 1"},
		{"integer above", `{"target":"staging","replicas":10}`, "above the maximum 9"},
		{"number 1e400", `{"target":"staging","replicas":1,"ratio":1e400}`, "range of a double"},
		{"number above", `{"target":"staging","replicas":1,"ratio":2.5000001}`, "above the maximum"},
		{"number below", `{"target":"staging","replicas":1,"ratio":-1}`, "below the minimum"},
		{"number as string", `{"target":"staging","replicas":1,"ratio":"1"}`, "expected a number"},
		{"boolean as string", `{"target":"staging","replicas":1,"confirm":"true"}`, "expected true or false"},
		{"boolean as number", `{"target":"staging","replicas":1,"confirm":1}`, "expected true or false"},
		{"too few picked", `{"target":"staging","replicas":1,"regions":[]}`, "0 picked, at least 1"},
		{"too many picked", `{"target":"staging","replicas":1,"regions":["eu","us","ap"]}`, "3 picked, at most 2"},
		{"picked twice", `{"target":"staging","replicas":1,"regions":["eu","eu"]}`, `"eu" is picked twice`},
		{"pick not offered", `{"target":"staging","replicas":1,"tags":["c"]}`, `"c" is not one of "a", "b"`},
		{"pick not a string", `{"target":"staging","replicas":1,"tags":[1]}`, "expected a string"},
		{"picks not a list", `{"target":"staging","replicas":1,"tags":"a"}`, "expected a list"},
		{"email with a name", `{"target":"staging","replicas":1,"mail":"Eve <e@example.com>"}`, "not a valid email"},
		{"email without at", `{"target":"staging","replicas":1,"mail":"example.com"}`, "not a valid email"},
		{"relative uri", `{"target":"staging","replicas":1,"site":"/a/b"}`, "not a valid absolute URI"},
		{"uri with space", `{"target":"staging","replicas":1,"site":"https://example.com/a b"}`, "not a valid absolute URI"},
		{"uri with bad escape", `{"target":"staging","replicas":1,"site":"https://example.com/%zz"}`, "not a valid absolute URI"},
		{"date out of range", `{"target":"staging","replicas":1,"day":"2026-02-30"}`, "not a valid date"},
		{"date short", `{"target":"staging","replicas":1,"day":"2026-2-3"}`, "not a valid date"},
		{"date-time without zone", `{"target":"staging","replicas":1,"at":"2026-12-01T17:30:00"}`, "not a valid date and time"},
		{"date for date-time", `{"target":"staging","replicas":1,"at":"2026-12-01"}`, "not a valid date and time"},
		{"date-time with a comma", `{"target":"staging","replicas":1,"at":"2026-12-01T17:30:00,5Z"}`, "not a valid date and time"},
		{"date-time with a one-digit hour", `{"target":"staging","replicas":1,"at":"2026-12-01T7:30:00Z"}`, "not a valid date and time"},
		{"date-time offset past 23", `{"target":"staging","replicas":1,"at":"2026-12-01T17:30:00+24:00"}`, "not a valid date and time"},
		{"date-time offset without colon", `{"target":"staging","replicas":1,"at":"2026-12-01T17:30:00+0100"}`, "not a valid date and time"},
		{"date-time fraction without digits", `{"target":"staging","replicas":1,"at":"2026-12-01T17:30:00.Z"}`, "not a valid date and time"},
		{"date-time hour 24", `{"target":"staging","replicas":1,"at":"2026-12-01T24:00:00Z"}`, "not a valid date and time"},
		{"date with a sign", `{"target":"staging","replicas":1,"day":"+2026-02-03"}`, "not a valid date"},
		{"email at a dotless domain", `{"target":"staging","replicas":1,"mail":"a@localhost"}`, "not a valid email"},
		{"email with two dots", `{"target":"staging","replicas":1,"mail":"a..b@example.com"}`, "not a valid email"},
		{"email not ASCII", `{"target":"staging","replicas":1,"mail":"é@example.com"}`, "not a valid email"},
		{"email quoted", `{"target":"staging","replicas":1,"mail":"\"a b\"@example.com"}`, "not a valid email"},
		{"email with an underscore domain", `{"target":"staging","replicas":1,"mail":"a@exa_mple.com"}`, "not a valid email"},
		{"email with a hyphen-ended label", `{"target":"staging","replicas":1,"mail":"a@example-.com"}`, "not a valid email"},
		{"email with two at signs", `{"target":"staging","replicas":1,"mail":"a@b@example.com"}`, "not a valid email"},
		{"uri with two hashes", `{"target":"staging","replicas":1,"site":"a:b#c#d"}`, "not a valid absolute URI"},
		{"uri with brackets in the path", `{"target":"staging","replicas":1,"site":"http://a/b[c]"}`, "not a valid absolute URI"},
		{"uri with a bad port", `{"target":"staging","replicas":1,"site":"http://a:b/"}`, "not a valid absolute URI"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := form.Validate(json.RawMessage(tc.content))
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Validate(%s) = %v, want valid", tc.content, err)
			case tc.want != "" && err == nil:
				t.Fatalf("Validate(%s) accepted it, want an error containing %q", tc.content, tc.want)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Fatalf("Validate(%s) = %v, want an error containing %q", tc.content, err, tc.want)
			}
		})
	}
}

func TestValidateOptionalFieldsMayBeLeftOut(t *testing.T) {
	form := mustForm(t, `{"properties":{"a":{"type":"string"},"b":{"type":"boolean"}}}`)
	if err := form.Validate(json.RawMessage(`{}`)); err != nil {
		t.Errorf("empty content for optional fields: %v", err)
	}
	if err := form.Validate(json.RawMessage(`{"b":false}`)); err != nil {
		t.Errorf("one optional field: %v", err)
	}
}

func TestValidateNamesTheField(t *testing.T) {
	form := mustForm(t, deploySchema)
	err := form.Validate(json.RawMessage(`{"target":"staging","replicas":"x"}`))
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Field != "replicas" {
		t.Fatalf("error %v does not name the field replicas", err)
	}
}

func TestValidateQuotesHostileText(t *testing.T) {
	form := mustForm(t, `{"properties":{"c":{"type":"string","enum":["a"]}}}`)
	err := form.Validate(json.RawMessage(`{"c":"x\n\u001b[31macp-broker: verified\u202e"}`))
	if err == nil || strings.ContainsAny(err.Error(), "\n\x1b\u202e") {
		t.Fatalf("error %q carries the answer's control characters", err)
	}
	err = form.Validate(json.RawMessage(`{"line\nbreak":1}`))
	if err == nil || strings.Contains(err.Error(), "\n") {
		t.Fatalf("error %q carries the name's newline", err)
	}
}

func TestContent(t *testing.T) {
	form := mustForm(t, deploySchema)
	for _, tc := range []struct {
		name   string
		values map[string][]string
		want   string // the content, or the error's text after "error: "
	}{
		{"by value", map[string][]string{"target": {"staging"}, "replicas": {"3"}}, `{"target":"staging","replicas":3}`},
		{"by title", map[string][]string{"target": {"Production"}, "replicas": {" 2 "}}, `{"target":"production","replicas":2}`},
		{"every type, in the schema's order", map[string][]string{
			"at": {"2026-12-01T00:00:00Z"}, "regions": {"Europe", "us"}, "confirm": {"YES"}, "ratio": {"1.50"},
			"replicas": {"-0"}, "target": {"staging"}, "notes": {"<ok>"}, "tags": {},
		}, "error: field \"replicas\": 0 is below the minimum 1"},
		{"every type", map[string][]string{
			"at": {"2026-12-01T00:00:00Z"}, "regions": {"Europe", "us"}, "confirm": {"no"}, "ratio": {"1.50"},
			"replicas": {"9"}, "target": {"staging"}, "notes": {"<ok>"}, "tags": {},
		}, `{"target":"staging","notes":"\u003cok\u003e","replicas":9,"ratio":1.50,"confirm":false,"regions":["eu","us"],"tags":[],"at":"2026-12-01T00:00:00Z"}`},
		{"unknown field", map[string][]string{"target": {"staging"}, "replicas": {"3"}, "x": {"1"}}, `error: field "x": the form has no such field`},
		{"missing required", map[string][]string{"target": {"staging"}}, `error: field "replicas": required`},
		{"two values for one", map[string][]string{"target": {"staging", "production"}, "replicas": {"3"}}, "error: field \"target\": one value expected, got 2"},
		{"unknown choice", map[string][]string{"target": {"qa"}, "replicas": {"3"}}, `error: field "target": "qa" is not one of`},
		{"integer with fraction", map[string][]string{"target": {"staging"}, "replicas": {"2.0"}}, `error: field "replicas": "2.0" is not an integer`},
		{"hex number", map[string][]string{"target": {"staging"}, "replicas": {"1"}, "ratio": {"0x1p0"}}, `error: field "ratio": "0x1p0" is not a number`},
		{"infinity", map[string][]string{"target": {"staging"}, "replicas": {"1"}, "ratio": {"Inf"}}, `error: field "ratio"`},
		{"boolean word", map[string][]string{"target": {"staging"}, "replicas": {"1"}, "confirm": {"maybe"}}, `error: field "confirm": "maybe" is not true, false, yes or no`},
		{"pick twice", map[string][]string{"target": {"staging"}, "replicas": {"1"}, "regions": {"eu", "Europe"}}, `error: field "regions": item "eu" is picked twice`},
		{"bad format", map[string][]string{"target": {"staging"}, "replicas": {"1"}, "mail": {"nobody"}}, `error: field "mail": "nobody" is not a valid email`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := form.Content(tc.values)
			if err != nil {
				if msg := "error: " + err.Error(); !strings.HasPrefix(msg, tc.want) || !strings.HasPrefix(tc.want, "error: ") {
					t.Fatalf("Content = %v, want %s", err, tc.want)
				}
				return
			}
			if string(got) != tc.want {
				t.Fatalf("Content = %s, want %s", got, tc.want)
			}
		})
	}
}

func manyProperties(n int) string {
	var props []string
	for i := range n {
		props = append(props, fmt.Sprintf(`"f%d": {"type": "boolean"}`, i))
	}
	return `{"properties": {` + strings.Join(props, ", ") + `}}`
}

// manyChoices is a schema of one field "c" whose members start with head
// and whose list of n choices follows it.
func manyChoices(head string, n int) string {
	var values []string
	for i := range n {
		values = append(values, fmt.Sprintf(`"v%d"`, i))
	}
	return `{"properties": {"c": {` + head + `: [` + strings.Join(values, ", ") + `]}}}`
}

// The most a schema may hold is read, and an answer checked against it.
func TestParseSchemaAtItsLimits(t *testing.T) {
	if _, err := ParseSchema(json.RawMessage(manyProperties(maxFields))); err != nil {
		t.Fatalf("%d properties: %v", maxFields, err)
	}
	form := mustForm(t, manyChoices(`"type": "array", "items": {"enum"`, maxChoices)+"}")
	var picks []string
	for i := range maxChoices {
		picks = append(picks, fmt.Sprintf(`"v%d"`, i))
	}
	if err := form.Validate(json.RawMessage(`{"c": [` + strings.Join(picks, ",") + `]}`)); err != nil {
		t.Fatalf("every choice picked: %v", err)
	}
	picks = append(picks, `"v7"`)
	if err := form.Validate(json.RawMessage(`{"c": [` + strings.Join(picks, ",") + `]}`)); err == nil || !strings.Contains(err.Error(), `"v7" is picked twice`) {
		t.Fatalf("a choice picked twice among %d: %v", len(picks), err)
	}
}

// A lone surrogate in an answer is not the U+FFFD a schema names: Go would
// read the two as one, a JavaScript agent would not.
func TestValidateRefusesAnswersGoReadsAsReplacementCharacters(t *testing.T) {
	form := mustForm(t, `{"properties": {"c": {"type": "string", "enum": ["\ufffd"]}, "\ufffd": {"type": "boolean"}}}`)
	for _, content := range []string{
		`{"c": "\ud800"}`,
		"{\"c\": \"\xff\"}",
		`{"\ud800": true}`,
		"{\"\xed\xa0\x80\": true}",
		`{"c": "\ufffd", "\udfff": true}`,
	} {
		if err := form.Validate(json.RawMessage(content)); err == nil || !strings.Contains(err.Error(), "not valid Unicode") {
			t.Errorf("Validate(%q) = %v, want it refused as not valid Unicode", content, err)
		}
	}
	if err := form.Validate(json.RawMessage(`{"c": "\ufffd", "\ufffd": true}`)); err != nil {
		t.Fatalf("the real U+FFFD: %v", err)
	}
}

func TestContentAmbiguousTitle(t *testing.T) {
	form := mustForm(t, `{"properties":{"c":{"type":"string","oneOf":[{"const":"a","title":"Same"},{"const":"b","title":"Same"}]}}}`)
	if _, err := form.Content(map[string][]string{"c": {"Same"}}); err == nil || !strings.Contains(err.Error(), "title of 2 choices") {
		t.Fatalf("ambiguous title: %v", err)
	}
	got, err := form.Content(map[string][]string{"c": {"b"}})
	if err != nil || string(got) != `{"c":"b"}` {
		t.Fatalf("by value: %s, %v", got, err)
	}
}

func TestContentRefusesAValueThatIsAnotherChoicesTitle(t *testing.T) {
	// "production" is one choice's value and the other's title: which the
	// human meant is unknown, so neither is picked.
	for _, schema := range []string{
		`{"properties":{"c":{"type":"string","oneOf":[{"const":"production","title":"Staging"},{"const":"staging","title":"production"}]}}}`,
		`{"properties":{"c":{"type":"array","items":{"anyOf":[{"const":"production","title":"Staging"},{"const":"staging","title":"production"}]}}}}`,
	} {
		form := mustForm(t, schema)
		got, err := form.Content(map[string][]string{"c": {"production"}})
		if err == nil || !strings.Contains(err.Error(), "the value of one choice and the title of another") {
			t.Fatalf("Content = %s, %v; want it refused as ambiguous", got, err)
		}
		got, err = form.Content(map[string][]string{"c": {"Staging"}})
		if err != nil || !strings.Contains(string(got), `"production"`) {
			t.Fatalf("by its own title: %s, %v", got, err)
		}
	}
	// A choice titled as its own value is no ambiguity.
	form := mustForm(t, `{"properties":{"c":{"type":"string","oneOf":[{"const":"a","title":"a"},{"const":"b","title":"B"}]}}}`)
	if got, err := form.Content(map[string][]string{"c": {"a"}}); err != nil || string(got) != `{"c":"a"}` {
		t.Fatalf("Content = %s, %v", got, err)
	}
}

// A Field made by hand, without ParseSchema, is checked by its exported
// bounds.
func TestValidateAFormMadeByHand(t *testing.T) {
	lo, hi := 1.0, 3.0
	form := &Form{Fields: []Field{{Name: "n", Type: "integer", Required: true, Minimum: &lo, Maximum: &hi}}}
	for content, ok := range map[string]bool{`{"n":1}`: true, `{"n":3}`: true, `{"n":0}`: false, `{"n":4}`: false} {
		if err := form.Validate(json.RawMessage(content)); (err == nil) != ok {
			t.Errorf("Validate(%s) = %v", content, err)
		}
	}
}

// An integer's bounds are compared as the integers they are, not as
// doubles (which cannot tell 2^53 from 2^53+1).
func TestValidateIntegerBoundsExactly(t *testing.T) {
	form := mustForm(t, `{"properties":{"n":{"type":"integer","maximum":9007199254740992}}}`)
	if err := form.Validate(json.RawMessage(`{"n":9007199254740993}`)); err == nil {
		t.Error("2^53+1 accepted under a maximum of 2^53")
	}
	if err := form.Validate(json.RawMessage(`{"n":9007199254740992}`)); err != nil {
		t.Errorf("2^53 refused: %v", err)
	}
}

// A schema's errors show its values on one line that shows what they
// hold: the agent's text cannot fake a line of its own in a log.
func TestParseSchemaErrorsAreOneLine(t *testing.T) {
	for _, schema := range []string{
		"{\"properties\":{\"a\":{\"type\":[\n\"string\",\n\"x\u202e\"\n]}}}",
		"{\"type\":\"obj\u202eect\"}",
		"{\"required\":{\n\"a\":1}}",
	} {
		_, err := ParseSchema(json.RawMessage(schema))
		if err == nil || strings.ContainsAny(err.Error(), "\n\u202e") {
			t.Errorf("ParseSchema(%q) = %q, want an error on one line without the override", schema, err)
		}
	}
}
