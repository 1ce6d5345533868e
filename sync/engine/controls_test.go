package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"lockstep/crypt"
	"lockstep/storage/db"
	"lockstep/sync/events"
	"lockstep/sync/fsys"
	"lockstep/sync/index"
)

// register makes an idle folder the engine's, as Reload would, so the
// engine's methods find it.
func register(f *folder) {
	f.e.mu.Lock()
	f.e.folders[f.id] = f
	f.e.mu.Unlock()
}

// TestNeededReasons: each item a folder needs says why it is not here: the
// error of its last attempt, that no connected device has it, or that the
// folder takes nothing (send-only).
func TestNeededReasons(t *testing.T) {
	peer := crypt.DeviceID{1}
	f := idleFolder(t)
	register(f)
	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(f.e.db.PutDevice(ctx, db.Device{ID: peer.String()}))
	must(f.e.db.ShareFolder(ctx, "f", peer.String()))
	must(f.refreshShares(ctx))
	stuck := peerFile(peer, "stuck.bin", index.File, 1)
	stuck.Blocks = []index.Block{{Size: 1}}
	stuck.ModifiedBy = peer.Short()
	announce(t, f, peer, stuck, peerFile(peer, "d", index.Dir, 2))
	need, total, err := f.e.Needed(ctx, "f", 0)
	must(err)
	byName := map[string]Needed{}
	for _, n := range need {
		byName[n.Name] = n
	}
	if total != 2 || len(need) != 2 {
		t.Fatalf("Needed = %+v (total %d), want d and stuck.bin", need, total)
	}
	if n := byName["stuck.bin"]; n.Reason != ReasonNoSource || n.Failed || n.By != peer {
		t.Errorf("before a pull: %+v, want %q by the peer", n, ReasonNoSource)
	}
	if n := byName["d"]; n.Reason != ReasonQueued {
		t.Errorf("a directory: %+v, want %q", n, ReasonQueued)
	}

	f.runPull(ctx)
	need, _, err = f.e.Needed(ctx, "f", 0)
	must(err)
	if len(need) != 1 || need[0].Name != "stuck.bin" || !need[0].Failed || !strings.Contains(need[0].Reason, "no connected device has it") {
		t.Fatalf("after a failed pull: %+v, want stuck.bin with the pull's error", need)
	}
	if need, total, _ := f.e.Needed(ctx, "f", 1); len(need) != 1 || total != 1 {
		t.Errorf("limit 1: %d items of %d", len(need), total)
	}

	// A deletion the mass deletion guard holds says so.
	if _, err := f.set.UpdateLocal(ctx, []index.Record{{Name: "mine", Type: index.File, Version: index.Vector{{ID: f.short, Value: 1}}}}); err != nil {
		t.Fatal(err)
	}
	gone := peerFile(peer, "mine", index.File, 3)
	gone.Deleted, gone.Version = true, index.Vector{{ID: f.short, Value: 1}, {ID: peer.Short(), Value: 3}}
	announce(t, f, peer, gone)
	f.changeState(func() { f.blocked, f.err = true, "stopped before a mass deletion" })
	need, _, err = f.e.Needed(ctx, "f", 0)
	must(err)
	held := false
	for _, n := range need {
		if n.Name == "mine" {
			held = n.Deleted && n.Reason == ReasonMassGuard+": stopped before a mass deletion"
		}
	}
	if !held {
		t.Errorf("a held deletion: %+v, want %q", need, ReasonMassGuard)
	}

	cfg := f.config()
	cfg.Type = db.SendOnly
	f.setConfig(cfg)
	need, _, err = f.e.Needed(ctx, "f", 0)
	must(err)
	for _, n := range need {
		if n.Reason != ReasonSendOnly {
			t.Errorf("send-only: %+v, want %q", n, ReasonSendOnly)
		}
	}

	if _, _, err := f.e.Needed(ctx, "nope", 0); !errors.Is(err, db.ErrNotFound) {
		t.Errorf("an unknown folder: %v, want ErrNotFound", err)
	}
}

// TestRecentChanges: a local change found by a scan and a change pulled
// from a peer are listed newest first with who made them; the list keeps
// the latest maxChanges.
func TestRecentChanges(t *testing.T) {
	dirA, dirB := t.TempDir(), t.TempDir()
	idA, idB := crypt.DeviceID{9}, crypt.DeviceID{1}
	a := startEngineWith(t, idA, 0, dirA, db.Device{ID: idB.String()})
	b := startEngineWith(t, idB, 0, dirB, db.Device{ID: idA.String()})
	connect(t, a, b)
	if err := os.WriteFile(filepath.Join(dirA, "from-a.txt"), []byte("a"), 0o644); err != nil {
		t.Fatal(err)
	}
	a.Scan("f")
	waitFor(t, "b to pull from-a.txt", func() bool {
		_, err := os.Stat(filepath.Join(dirB, "from-a.txt"))
		return err == nil
	})
	ctx := context.Background()
	find := func(e *Engine, name string) (Change, bool) {
		cs, err := e.RecentChanges(ctx, "f")
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cs {
			if c.Name == name {
				return c, true
			}
		}
		return Change{}, false
	}
	waitFor(t, "a to list its change", func() bool { _, ok := find(a, "from-a.txt"); return ok })
	if c, _ := find(a, "from-a.txt"); !c.Local || c.By != idA || c.Action != events.ActionUpdate || c.Type != index.File || c.Size != 1 {
		t.Errorf("on a: %+v, want a local update by a", c)
	}
	waitFor(t, "b to list the pulled change", func() bool { _, ok := find(b, "from-a.txt"); return ok })
	if c, _ := find(b, "from-a.txt"); c.Local || c.By != idA {
		t.Errorf("on b: %+v, want a change pulled, made by a", c)
	}
	if err := os.Remove(filepath.Join(dirB, "from-a.txt")); err != nil {
		t.Fatal(err)
	}
	b.Scan("f")
	waitFor(t, "a to delete from-a.txt", func() bool {
		_, err := os.Stat(filepath.Join(dirA, "from-a.txt"))
		return errors.Is(err, os.ErrNotExist)
	})
	waitFor(t, "a to list the deletion first", func() bool {
		cs, _ := a.RecentChanges(ctx, "f")
		return len(cs) > 0 && cs[0].Name == "from-a.txt" && cs[0].Action == events.ActionDelete && cs[0].By == idB && !cs[0].Local
	})

	f := a.folder("f")
	for i := range maxChanges + 50 {
		f.noteChanges([]index.Record{{Name: fmt.Sprintf("n%d", i), ModifiedBy: idA.Short()}}, true)
	}
	cs, _ := a.RecentChanges(ctx, "f")
	if len(cs) != maxChanges || cs[0].Name != fmt.Sprintf("n%d", maxChanges+49) || cs[len(cs)-1].Name != "n50" {
		t.Fatalf("after %d changes: %d kept, newest %q, oldest %q", maxChanges+50, len(cs), cs[0].Name, cs[len(cs)-1].Name)
	}
}

// TestSetIgnores: patterns are written whole, take effect at the rescan
// they start, and bad ones are refused without touching the file.
func TestSetIgnores(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "first.txt"), []byte("1"), 0o644); err != nil {
		t.Fatal(err)
	}
	e := startEngine(t, dir)
	ctx := context.Background()
	// The first scan read no patterns: wait until it is over.
	waitFor(t, "the first scan to end", func() bool {
		st, _ := e.FolderStatus("f")
		_, ok := e.folder("f").set.Local("first.txt")
		return ok && st.State == StateIdle
	})
	if got, err := e.Ignores(ctx, "f"); err != nil || got != "" {
		t.Fatalf("no ignore file: %q, %v", got, err)
	}
	if err := e.SetIgnores(ctx, "f", "*.tmp\n"); err != nil {
		t.Fatal(err)
	}
	// Written after the patterns, so every scan that finds them has them.
	if err := os.WriteFile(filepath.Join(dir, "skip.tmp"), []byte("s"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "keep.txt"), []byte("k"), 0o644); err != nil {
		t.Fatal(err)
	}
	e.Scan("f")
	if got, err := e.Ignores(ctx, "f"); err != nil || got != "*.tmp\n" {
		t.Fatalf("after SetIgnores: %q, %v", got, err)
	}
	f := e.folder("f")
	waitFor(t, "the rescan to take keep.txt", func() bool { _, ok := f.set.Local("keep.txt"); return ok })
	if _, ok := f.set.Local("skip.tmp"); ok {
		t.Error("skip.tmp is in the index though ignored")
	}
	if err := e.SetIgnores(ctx, "f", "ok\nbad\x00line\n"); !errors.Is(err, ErrBadIgnores) || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("a pattern with NUL: %v, want ErrBadIgnores naming line 2", err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, ".lockstepignore")); string(got) != "*.tmp\n" {
		t.Errorf("a refused edit changed the file to %q", got)
	}
	entries, _ := os.ReadDir(dir)
	for _, de := range entries {
		if fsys.IsTemp(de.Name()) {
			t.Errorf("temp file %s left behind", de.Name())
		}
	}
}

// TestPausedFolderDoesNotRun: a paused folder stops and says so; resumed,
// it runs again.
func TestPausedFolderDoesNotRun(t *testing.T) {
	dir := t.TempDir()
	e := startEngine(t, dir)
	ctx := context.Background()
	if err := e.db.SetFolderPaused(ctx, "f", true); err != nil {
		t.Fatal(err)
	}
	if err := e.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := e.FolderStatus("f"); ok {
		t.Fatal("a paused folder runs")
	}
	if _, _, err := e.Needed(ctx, "f", 0); !errors.Is(err, ErrPaused) {
		t.Errorf("Needed of a paused folder: %v", err)
	}
	if _, err := e.RecentChanges(ctx, "f"); !errors.Is(err, ErrPaused) {
		t.Errorf("RecentChanges of a paused folder: %v", err)
	}
	if err := e.SetIgnores(ctx, "f", "x\n"); err != nil {
		t.Errorf("ignores of a paused folder: %v", err)
	}
	if err := e.db.SetFolderPaused(ctx, "f", false); err != nil {
		t.Fatal(err)
	}
	if err := e.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := e.FolderStatus("f"); !ok {
		t.Fatal("a resumed folder does not run")
	}
}

// TestLocalOnlyAnnouncedAfterTypeChange: changes a receive-only folder
// kept to itself are announced once it is send-receive.
func TestLocalOnlyAnnouncedAfterTypeChange(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "old.txt"), []byte("o"), 0o644); err != nil {
		t.Fatal(err)
	}
	e := startEngine(t, dir)
	ctx := context.Background()
	waitFor(t, "the first scan to take old.txt", func() bool {
		_, ok := e.folder("f").set.Local("old.txt")
		return ok
	})
	if err := e.db.SetFolderType(ctx, "f", db.ReceiveOnly); err != nil {
		t.Fatal(err)
	}
	if err := e.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "mine.txt"), []byte("m"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "old.txt")); err != nil {
		t.Fatal(err)
	}
	var f *folder
	waitFor(t, "the receive-only folder to take mine.txt and old.txt's deletion", func() bool {
		f = e.folder("f")
		if f == nil {
			return false
		}
		f.requestScan(nil)
		r, ok := f.set.Local("mine.txt")
		d, dok := f.set.Local("old.txt")
		return ok && r.Flags&index.FlagLocalOnly != 0 && dok && d.Deleted && d.Flags&index.FlagLocalOnly != 0
	})
	if announced(f, "mine.txt") || announced(f, "old.txt") {
		t.Fatal("a receive-only folder announces its local change")
	}
	if err := e.db.SetFolderType(ctx, "f", db.SendReceive); err != nil {
		t.Fatal(err)
	}
	if err := e.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "mine.txt and old.txt's deletion to be announced", func() bool {
		f := e.folder("f")
		return f != nil && announced(f, "mine.txt") && announced(f, "old.txt")
	})
}

func announced(f *folder, name string) bool {
	for _, r := range f.set.LocalSince(0) {
		if r.Name == name {
			return true
		}
	}
	return false
}
