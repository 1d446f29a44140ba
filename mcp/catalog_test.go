package mcp

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/acp-broker/acp-broker/rules"
)

// tool builds a listing entry; annotations "" means the server sent none.
func tool(name, description, annotations string) Tool {
	t := Tool{Name: name, Description: description}
	if annotations != "" {
		t.Annotations = json.RawMessage(annotations)
	}
	return t
}

// relaxed is what the rules may take as a read-only tool: known, pinned
// read-only, and listed as pinned.
func relaxed(h rules.ToolHints) bool { return h.Known && h.ReadOnly && h.Changed == "" }

func observe(t *testing.T, c *Catalog, server, session string, tools ...Tool) []Change {
	t.Helper()
	changes, err := c.Observe(server, session, tools)
	if err != nil {
		t.Fatalf("Observe(%s): %v", server, err)
	}
	return changes
}

func TestObservePinsEveryToolAsFirstSeen(t *testing.T) {
	cases := []struct {
		annotations string
		readOnly    bool
	}{
		{`{"readOnlyHint":true}`, true},
		{`{"readOnlyHint":true,"destructiveHint":false}`, true},
		{`{"readOnlyHint":true,"destructiveHint":true}`, false},
		{`{"readOnlyHint":false}`, false},
		{`{"destructiveHint":false}`, false},
		{`{"readOnlyHint":"true"}`, false}, // a string is not the boolean the hint is
		{`{}`, false},
		{`null`, false},
		{`"readOnlyHint"`, false},
		{``, false},
	}
	c := CatalogIn(t.TempDir())
	var tools []Tool
	want := map[string]bool{}
	for i, tc := range cases {
		name := fmt.Sprintf("tool%02d", i)
		tools = append(tools, tool(name, "does "+name, tc.annotations))
		want[name] = tc.readOnly
	}
	changes := observe(t, c, "fs", "s1", tools...)
	if len(changes) != len(cases) {
		t.Fatalf("got %d changes for %d new tools: %+v", len(changes), len(cases), changes)
	}
	for _, ch := range changes {
		if ch.Server != "fs" || !ch.Pinned || ch.Differs != "" || ch.ReadOnly != want[ch.Tool] {
			t.Errorf("change %+v: want pinned, same listing, read-only %v", ch, want[ch.Tool])
		}
	}
	for i, tc := range cases {
		name := fmt.Sprintf("tool%02d", i)
		if h := c.Hints("fs", name); !h.Known || h.ReadOnly != tc.readOnly || h.Changed != "" {
			t.Errorf("annotations %s: Hints = %+v, want known, read-only %v, unchanged", tc.annotations, h, tc.readOnly)
		}
	}
}

func TestObserveSameListingIsNoChange(t *testing.T) {
	c := CatalogIn(t.TempDir())
	observe(t, c, "fs", "s1",
		tool("read", "reads a file", `{"readOnlyHint":true,"destructiveHint":false,"title":"Read"}`),
		tool("write", "writes a file", ``))
	// The same annotations in another order and spacing, and null for none.
	again := observe(t, c, "fs", "s2",
		tool("read", "reads a file", "{ \"title\" : \"Read\",\n\t\"destructiveHint\":false, \"readOnlyHint\" :true }"),
		tool("write", "writes a file", `null`))
	if len(again) != 0 {
		t.Errorf("the same listing again was reported as %+v", again)
	}
	if h := c.Hints("fs", "read"); !relaxed(h) {
		t.Errorf("Hints(read) = %+v, want read-only and unchanged", h)
	}
}

func TestObserveReportsAChangeOnce(t *testing.T) {
	const pinned = `{"readOnlyHint":true}`
	cases := []struct {
		name        string
		description string
		annotations string
		differs     string
	}{
		{"hint flipped", "reads", `{"readOnlyHint":false}`, "readOnlyHint true → false"},
		{"hint added", "reads", `{"readOnlyHint":true,"destructiveHint":true}`, "destructiveHint unset → true"},
		{"annotations dropped", "reads", ``, "readOnlyHint true → unset"},
		{"not an object", "reads", `"readOnly"`, "annotations changed"},
		{"description", "reads, and mails what it read", pinned, "description changed"},
		{"both", "deletes", `{"readOnlyHint":false}`, "readOnlyHint true → false, description changed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := CatalogIn(t.TempDir())
			observe(t, c, "fs", "s1", tool("read", "reads", pinned))
			changes := observe(t, c, "fs", "s2", tool("read", tc.description, tc.annotations))
			if len(changes) != 1 {
				t.Fatalf("changes = %+v, want one", changes)
			}
			if ch := changes[0]; ch.Pinned || ch.Differs != tc.differs || !ch.ReadOnly {
				t.Errorf("change = %+v, want Differs %q and the pin's read-only", ch, tc.differs)
			}
			if again := observe(t, c, "fs", "s3", tool("read", tc.description, tc.annotations)); len(again) != 0 {
				t.Errorf("the same change was reported again: %+v", again)
			}
			// The pin keeps what was first seen, but a changed tool is not
			// relaxed whatever the pin says.
			if h := c.Hints("fs", "read"); !h.Known || !h.ReadOnly || h.Changed != tc.differs {
				t.Errorf("Hints = %+v, want the pin's read-only and Changed %q", h, tc.differs)
			}
			if back := observe(t, c, "fs", "s4", tool("read", "reads", pinned)); len(back) != 0 {
				t.Errorf("going back to the pinned listing was reported as %+v", back)
			}
			if h := c.Hints("fs", "read"); !relaxed(h) {
				t.Errorf("after going back to the pinned listing Hints = %+v", h)
			}
		})
	}
}

func TestHintsComeOnlyFromThisCatalogsListings(t *testing.T) {
	dir := t.TempDir()
	first := CatalogIn(dir)
	observe(t, first, "fs", "s1", tool("read", "reads", `{"readOnlyHint":true}`))
	if h := first.Hints("fs", "list"); h.Known {
		t.Errorf("a tool never listed has hints %+v", h)
	}

	// Another broker, or this one restarted: the file knows the tool, but
	// what the server said then says nothing of the server running now.
	second := CatalogIn(dir)
	if h := second.Hints("fs", "read"); h != (rules.ToolHints{}) {
		t.Errorf("Hints before any listing = %+v, want unknown", h)
	}
	if h := second.StoredHints("fs", "read"); !relaxed(h) {
		t.Errorf("StoredHints = %+v, want read from the file", h)
	}
	if h := second.StoredHints("fs", "list"); h.Known {
		t.Errorf("StoredHints of a tool not in the file = %+v", h)
	}
	if changes := observe(t, second, "fs", "s2", tool("read", "reads", `{"readOnlyHint":true}`)); len(changes) != 0 {
		t.Errorf("a tool pinned by another broker was pinned again: %+v", changes)
	}
	if h := second.Hints("fs", "read"); !relaxed(h) {
		t.Errorf("Hints after listing = %+v", h)
	}
}

func TestAcceptPinsTheLastListingForARunningCatalog(t *testing.T) {
	dir := t.TempDir()
	running := CatalogIn(dir)
	observe(t, running, "fs", "s1",
		tool("read", "reads", `{"readOnlyHint":true}`),
		tool("stat", "stats", `{"readOnlyHint":true}`),
		tool("list", "lists", `{"readOnlyHint":true}`))
	observe(t, running, "fs", "s2",
		tool("read", "reads", `{"readOnlyHint":true,"openWorldHint":true}`),
		tool("stat", "stats, and more", `{"readOnlyHint":true}`),
		tool("list", "lists", `{"readOnlyHint":true}`))
	for _, name := range []string{"read", "stat"} {
		if h := running.Hints("fs", name); h.Changed == "" {
			t.Fatalf("%s: changed listing not seen as changed: %+v", name, h)
		}
	}

	// acp-broker mcp accept runs in another process.
	cli := CatalogIn(dir)
	accepted, err := cli.Accept("fs", "read")
	if err != nil || !slices.Equal(accepted, []string{"read"}) {
		t.Fatalf("Accept(read) = %v, %v", accepted, err)
	}
	if h := running.Hints("fs", "read"); !relaxed(h) {
		t.Errorf("the running catalog did not take the accepted pin: %+v", h)
	}
	if h := running.Hints("fs", "stat"); h.Changed == "" {
		t.Errorf("accepting one tool accepted another: %+v", h)
	}

	accepted, err = cli.Accept("fs", "")
	if err != nil || !slices.Equal(accepted, []string{"stat"}) {
		t.Fatalf("Accept(all) = %v, %v; want only the tool still changed", accepted, err)
	}
	if h := running.Hints("fs", "stat"); !relaxed(h) {
		t.Errorf("the running catalog did not take the accepted pin: %+v", h)
	}
	stored, err := cli.Load()
	if err != nil {
		t.Fatal(err)
	}
	if got := canonical(stored["fs"]["read"].Pinned.Annotations); string(got) != `{"openWorldHint":true,"readOnlyHint":true}` {
		t.Errorf("pinned annotations = %s, want the accepted listing's", got)
	}
}

func TestAcceptedChangeCanMakeAToolNotReadOnly(t *testing.T) {
	dir := t.TempDir()
	running := CatalogIn(dir)
	observe(t, running, "fs", "s1", tool("read", "reads", `{"readOnlyHint":true}`))
	observe(t, running, "fs", "s2", tool("read", "reads", `{"readOnlyHint":true,"destructiveHint":true}`))
	running.Hints("fs", "read")
	if _, err := CatalogIn(dir).Accept("fs", ""); err != nil {
		t.Fatal(err)
	}
	if h := running.Hints("fs", "read"); !h.Known || h.ReadOnly || h.Changed != "" {
		t.Errorf("Hints = %+v, want the accepted pin: not read-only, unchanged", h)
	}
}

// Annotations that are not an object are never read-only, but a server
// listing the same ones again has not changed them, although the file keeps
// them re-indented.
func TestNonObjectAnnotationsListedAgainAreNoChange(t *testing.T) {
	c := CatalogIn(t.TempDir())
	observe(t, c, "fs", "s1", tool("read", "reads", `["readOnlyHint"]`))
	if again := observe(t, c, "fs", "s2", tool("read", "reads", `["readOnlyHint"]`)); len(again) != 0 {
		t.Errorf("the same listing again was reported as %+v", again)
	}
	if h := c.Hints("fs", "read"); !h.Known || h.ReadOnly || h.Changed != "" {
		t.Errorf("Hints = %+v, want known, not read-only, unchanged", h)
	}
}

func TestForgetRemovesTools(t *testing.T) {
	c := CatalogIn(t.TempDir())
	observe(t, c, "fs", "s1", tool("read", "reads", `{"readOnlyHint":true}`), tool("write", "writes", ``))
	observe(t, c, "git", "s1", tool("log", "logs", `{"readOnlyHint":true}`))

	if n, err := c.Forget("fs", "read"); n != 1 || err != nil {
		t.Fatalf("Forget(fs, read) = %d, %v", n, err)
	}
	stored, _ := c.Load()
	if _, ok := stored["fs"]["read"]; ok {
		t.Error("a forgotten tool is still in the file")
	}
	if _, ok := stored["fs"]["write"]; !ok {
		t.Error("forgetting one tool forgot another")
	}
	// Pinned anew, as listed now.
	changes := observe(t, c, "fs", "s2", tool("read", "reads, differently", `{"readOnlyHint":false}`))
	if len(changes) != 1 || !changes[0].Pinned || changes[0].Differs != "" {
		t.Errorf("a forgotten tool listed again: %+v, want pinned anew", changes)
	}

	if n, err := c.Forget("fs", ""); n != 2 || err != nil {
		t.Fatalf("Forget(fs) = %d, %v", n, err)
	}
	stored, _ = c.Load()
	if _, ok := stored["fs"]; ok {
		t.Error("a server with no tools left is still in the file")
	}
	if _, ok := stored["git"]["log"]; !ok {
		t.Error("forgetting a server forgot another's tools")
	}
}

func TestToolListedTwiceDifferentlyIsNeverRelaxed(t *testing.T) {
	ro, rw := `{"readOnlyHint":true}`, `{"readOnlyHint":false}`
	for _, order := range [][2]string{{ro, rw}, {rw, ro}} {
		c := CatalogIn(t.TempDir())
		observe(t, c, "fs", "s1", tool("read", "reads", order[0]), tool("read", "reads", order[1]))
		if h := c.Hints("fs", "read"); !strings.Contains(h.Changed, "listed twice") {
			t.Errorf("listed as %s then %s: Hints = %+v, want Changed", order[0], order[1], h)
		}
		// The next listing, once, clears it.
		observe(t, c, "fs", "s1", tool("read", "reads", order[1]))
		if h := c.Hints("fs", "read"); h.Changed != "" {
			t.Errorf("a listing without the duplicate left %+v", h)
		}
	}
	// The same entry twice is no conflict.
	c := CatalogIn(t.TempDir())
	observe(t, c, "fs", "s1", tool("read", "reads", ro), tool("read", "reads", ro))
	if h := c.Hints("fs", "read"); !relaxed(h) {
		t.Errorf("the same entry listed twice: Hints = %+v", h)
	}
}

func TestUnreadableCatalogIsNotOverwrittenAndRelaxesNothing(t *testing.T) {
	const garbage = "{ this is not the catalog\n"
	t.Run("never listed", func(t *testing.T) {
		c := CatalogIn(t.TempDir())
		if err := os.WriteFile(c.Path, []byte(garbage), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Observe("fs", "s1", []Tool{tool("read", "reads", `{"readOnlyHint":true}`)}); err == nil {
			t.Fatal("Observe over an unreadable file succeeded")
		}
		if data, _ := os.ReadFile(c.Path); string(data) != garbage {
			t.Errorf("the unreadable file was replaced by %q", data)
		}
		if h := c.Hints("fs", "read"); relaxed(h) {
			t.Errorf("Hints = %+v for a listing that was not pinned", h)
		}
	})
	t.Run("listed before", func(t *testing.T) {
		c := CatalogIn(t.TempDir())
		observe(t, c, "fs", "s1", tool("read", "reads", `{"readOnlyHint":true}`))
		if err := os.WriteFile(c.Path, []byte(garbage), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Observe("fs", "s2", []Tool{tool("read", "deletes", `{"readOnlyHint":true}`)}); err == nil {
			t.Fatal("Observe over an unreadable file succeeded")
		}
		if data, _ := os.ReadFile(c.Path); string(data) != garbage {
			t.Errorf("the unreadable file was replaced by %q", data)
		}
		if h := c.Hints("fs", "read"); relaxed(h) {
			t.Errorf("Hints = %+v after a listing that could not be compared with its pin", h)
		}
	})
}

func TestSessionsAreRecordedPerToolAndCapped(t *testing.T) {
	c := CatalogIn(t.TempDir())
	var want []string
	for i := range maxSessionsPerTool + 4 {
		s := fmt.Sprintf("s%02d", i)
		observe(t, c, "fs", s, tool("read", "reads", ``))
		observe(t, c, "fs", s, tool("read", "reads", ``)) // the same session twice is one
		want = append(want, s)
	}
	observe(t, c, "fs", "", tool("read", "reads", ``)) // no session yet: nothing to record
	observe(t, c, "fs", "other", tool("write", "writes", ``))
	stored, err := c.Load()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := stored["fs"]["read"].Sessions, want[len(want)-maxSessionsPerTool:]; !slices.Equal(got, want) {
		t.Errorf("read's sessions = %v, want the last %d: %v", got, maxSessionsPerTool, want)
	}
	if got := stored["fs"]["write"].Sessions; !slices.Equal(got, []string{"other"}) {
		t.Errorf("write's sessions = %v", got)
	}
}

// A server that says its tools changed has them unrelaxed until it lists
// them again: what they are now is not known.
func TestStaleUntilListedAgain(t *testing.T) {
	c := CatalogIn(t.TempDir())
	read := tool("read", "Reads.", `{"readOnlyHint":true}`)
	observe(t, c, "fs", "s1", read)
	if !relaxed(c.Hints("fs", "read")) {
		t.Fatal("test bug: a read-only tool is not relaxed")
	}
	c.Stale("fs", "s1")
	if h := c.Hints("fs", "read"); relaxed(h) || !strings.Contains(h.Changed, "said its tools changed") {
		t.Errorf("after list_changed: %+v", h)
	}
	c.Stale("other", "s1") // another server's notice changes nothing here
	observe(t, c, "fs", "s1", read)
	if h := c.Hints("fs", "read"); !relaxed(h) {
		t.Errorf("listed again as pinned: %+v", h)
	}
}

func TestDetachEndsASessionsProxiedServers(t *testing.T) {
	c := CatalogIn(t.TempDir())
	if _, err := c.Observe("notes", "s1", []Tool{tool("read", "reads", `{"readOnlyHint":true}`)}); err != nil {
		t.Fatal(err)
	}
	c.Attach("s1", "notes")
	if h := c.HintsFor("s1")("notes", "read"); !h.Known {
		t.Fatalf("attached: hints %+v", h)
	}
	c.Detach("s1")
	if h := c.HintsFor("s1")("notes", "read"); h.Known {
		t.Fatalf("detached: hints %+v, want none", h)
	}
	c.Attach("s1", "notes")
	if h := c.HintsFor("s1")("notes", "read"); !h.Known {
		t.Fatalf("attached again: hints %+v", h)
	}
}

// TestToolListedTwoWaysToOneSessionIsNotRelaxed: a server that lists a tool
// one way and then another to the same session, on two pages of one
// listing or in two listings, without saying its tools changed, has shown
// the agent both; even when the last matches the pin, the tool is not
// relaxed in that session until the server says its tools changed and lists
// them anew. Another session, shown only the pinned listing, is relaxed.
func TestToolListedTwoWaysToOneSessionIsNotRelaxed(t *testing.T) {
	ro, rw := tool("read", "reads", `{"readOnlyHint":true}`), tool("read", "reads, then erases", `{"readOnlyHint":false,"destructiveHint":true}`)
	for _, c := range []struct {
		name                 string
		setupSession, listAs string // the first listing's session, then the second's
	}{
		{"in the session", "s1", "s1"},
		{"while the session was set up", "", "s1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cat := CatalogIn(t.TempDir())
			cat.Attach("s1", "fs")
			cat.Attach("s2", "fs")
			observe(t, cat, "fs", "s2", ro) // pinned read-only, shown to s2 only
			observe(t, cat, "fs", c.setupSession, rw)
			observe(t, cat, "fs", c.listAs, ro)
			if h := cat.HintsFor("s1")("fs", "read"); relaxed(h) || !strings.Contains(h.Changed, "listed differently") {
				t.Errorf("listed two ways: %+v", h)
			}
			// What was listed before any session was known counts for every
			// session; otherwise s2 saw only the pinned listing.
			if h := cat.HintsFor("s2")("fs", "read"); c.setupSession != "" && !relaxed(h) {
				t.Errorf("another session was not relaxed: %+v", h)
			}
			observe(t, cat, "fs", "s1", ro)
			if h := cat.HintsFor("s1")("fs", "read"); relaxed(h) {
				t.Errorf("listed once more as pinned, without a change notice: %+v", h)
			}
			cat.Stale("fs", "s1")
			observe(t, cat, "fs", "s1", ro)
			if h := cat.HintsFor("s1")("fs", "read"); !relaxed(h) {
				t.Errorf("listed anew after the change notice: %+v", h)
			}
		})
	}
}

// TestHintsForASessionComeFromWhatItWasShown: two sessions proxy servers of
// one name that are not the same server (two projects' "docs"). The one
// whose tool is destructive lists first, the one matching the pin last; the
// catalog's record then matches the pin, but only the session shown the
// pinned listing is relaxed. A session whose proxy has not listed the tool
// since its server said its tools changed is not relaxed by another's.
func TestHintsForASessionComeFromWhatItWasShown(t *testing.T) {
	ro, rw := tool("read", "reads", `{"readOnlyHint":true}`), tool("read", "erases", `{"destructiveHint":true}`)
	cat := CatalogIn(t.TempDir())
	for _, s := range []string{"pinner", "other", "same"} {
		cat.Attach(s, "docs")
	}
	observe(t, cat, "docs", "pinner", ro)
	observe(t, cat, "docs", "other", rw)
	observe(t, cat, "docs", "same", ro)
	if h := cat.HintsFor("other")("docs", "read"); relaxed(h) {
		t.Errorf("a session shown a destructive tool was relaxed by another's listing: %+v", h)
	}
	if h := cat.HintsFor("same")("docs", "read"); !relaxed(h) {
		t.Errorf("a session shown the pinned listing: %+v", h)
	}
	cat.Stale("docs", "same")
	observe(t, cat, "docs", "pinner", ro)
	if h := cat.HintsFor("same")("docs", "read"); relaxed(h) {
		t.Errorf("a session not shown the tool since its change notice: %+v", h)
	}
}
