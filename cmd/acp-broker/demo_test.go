package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/acp-broker/acp-broker/internal/demo"
)

// TestDemoBrokerChangesNothing plays the demo's conversation twice, once
// with the editor talking to the example agent directly and once through a
// real broker process, and requires the same messages in the same order,
// byte for byte: the broker, with no rules, must be invisible.
func TestDemoBrokerChangesNothing(t *testing.T) {
	// TestMain put this test binary on PATH as acp-broker.
	self, err := exec.LookPath("acp-broker")
	if err != nil {
		t.Fatal(err)
	}
	ws := t.TempDir()
	run := func(opts demo.Options) *demo.Result {
		t.Helper()
		entries, err := os.ReadDir(ws)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			os.RemoveAll(filepath.Join(ws, e.Name()))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var stdout, stderr bytes.Buffer
		opts.Workspace, opts.Stdout, opts.Stderr = ws, &stdout, &stderr
		res, err := demo.Run(ctx, opts)
		if err != nil {
			t.Fatalf("demo.Run(Direct: %v): %v\nstdout:\n%s\nstderr:\n%s", opts.Direct, err, &stdout, &stderr)
		}
		if stderr.Len() != 0 {
			t.Errorf("demo.Run(Direct: %v) stderr:\n%s", opts.Direct, &stderr)
		}
		return res
	}
	direct := run(demo.Options{Direct: true})
	brokered := run(demo.Options{Self: self})

	if len(direct.Entries) == 0 {
		t.Fatal("no messages")
	}
	for i := range max(len(direct.Entries), len(brokered.Entries)) {
		var d, b demo.Entry
		if i < len(direct.Entries) {
			d = direct.Entries[i]
		}
		if i < len(brokered.Entries) {
			b = brokered.Entries[i]
		}
		if !reflect.DeepEqual(d, b) {
			t.Fatalf("message %d differs:\ndirect:         %s → %s %s\nthrough broker: %s → %s %s", i+1, d.From, d.To, d.Raw, b.From, b.To, b.Raw)
		}
	}
}
