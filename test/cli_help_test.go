package test

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// subcommands lists the commands `--help` of args names under
// "Available Commands:".
func subcommands(t *testing.T, home string, args ...string) []string {
	t.Helper()
	out := mustRun(t, home, append(args, "--help")...)
	_, list, ok := strings.Cut(out, "Available Commands:\n")
	if !ok {
		return nil
	}
	var names []string
	for _, line := range strings.Split(list, "\n") {
		if !strings.HasPrefix(line, "  ") {
			break
		}
		names = append(names, strings.Fields(line)[0])
	}
	return names
}

// TestCLIHelpExamples: the help of every command, down to the last
// subcommand, shows examples.
func TestCLIHelpExamples(t *testing.T) {
	home := filepath.Join(t.TempDir(), "h")
	var walk func(path []string)
	seen := 0
	walk = func(path []string) {
		out := mustRun(t, home, append(path, "--help")...)
		seen++
		if !strings.Contains(out, "\nExamples:\n") {
			t.Errorf("lockstep %s --help shows no examples", strings.Join(path, " "))
		}
		for _, sub := range subcommands(t, home, path...) {
			if sub != "help" {
				walk(append(slices.Clip(path), sub))
			}
		}
	}
	walk(nil)
	if seen < 30 {
		t.Fatalf("walked only %d commands", seen)
	}
}

// TestCLICompletion: the shell completion offers the running node's
// folder IDs, device IDs with their names, and flag values; a shell's
// script is generated for bash, zsh and fish.
func TestCLICompletion(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	for _, shell := range []string{"bash", "zsh", "fish"} {
		if out := mustRun(t, t.TempDir(), "completion", shell); !strings.Contains(out, "__complete") {
			t.Errorf("completion %s: no script that asks lockstep:\n%.200s", shell, out)
		}
	}
	n := startNode(t, "a")
	bob := newDeviceID(t, "bob")
	n.cli("device", "add", bob, "--name", "bob")
	n.cli("folder", "add", "docs", filepath.Join(t.TempDir(), "docs"), "--label", "Documents")
	n.cli("folder", "add", "photos", filepath.Join(t.TempDir(), "photos"))
	complete := func(args ...string) []string {
		t.Helper()
		out := n.cli(append([]string{"__complete"}, args...)...)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		// The last line is cobra's directive (":4", no file names).
		return lines[:len(lines)-1]
	}
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"folder", "share", ""}, []string{"docs\tDocuments, sendreceive", "photos\tsendreceive"}},
		{[]string{"folder", "share", "docs", ""}, []string{bob + "\tbob"}},
		{[]string{"device", "remove", ""}, []string{bob + "\tbob"}},
		{[]string{"versions", ""}, []string{"docs\tDocuments, sendreceive", "photos\tsendreceive"}},
		{[]string{"folder", "versioning", "docs", "--type", ""}, []string{"none", "trashcan", "simple", "staggered"}},
		{[]string{"folder", "add", "x", "y", "--type", ""}, []string{"sendreceive", "sendonly", "receiveonly", "encrypted"}},
	} {
		if got := complete(c.args...); !slices.Equal(got, c.want) {
			t.Errorf("completing lockstep %q: %q, want %q", c.args, got, c.want)
		}
	}
	// Without a daemon there is nothing to offer, and no error.
	if out := mustRun(t, t.TempDir(), "__complete", "folder", "share", ""); strings.TrimSpace(out) != ":4" {
		t.Errorf("completion without a daemon printed %q", out)
	}
}
