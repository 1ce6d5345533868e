package test

import (
	"bytes"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"lockstep/test/testutil"
)

// TestRotateKey: `folder share --rotate-key` changes the password on the
// receiver and seals what is written afterwards with a new key. The new
// password recovers everything, old and new. The old password no longer
// opens the receiver's envelope; and someone who kept the old envelope
// (or the key it held) and copies the store after the change reads only
// what was there before it: not a new file, not a new version.
func TestRotateKey(t *testing.T) {
	if testing.Short() {
		t.Skip("long end-to-end test")
	}
	a, r := startNode(t, "a"), startNode(t, "r")
	dirA := filepath.Join(t.TempDir(), "a")
	writeFile(t, filepath.Join(dirA, "notes.txt"), []byte("written before the rotation\n"), 0o644)
	writeFile(t, filepath.Join(dirA, "photo.bin"), randomBytes(7, 300<<10), 0o644)
	a.cli("folder", "add", "docs", dirA)
	holdFolder(t, r, "docs", a)
	oldPw, newPw := passwordFile(t, "old password"), passwordFile(t, "new password")
	backUpTo(t, a, r, "docs", oldPw)
	waitBackedUp(t, a, r, "docs")
	oldEnv := receiverEnvelope(t, r)

	out := a.cli("folder", "share", "docs", r.ID, "--password-file", oldPw, "--new-password-file", newPw, "--rotate-key")
	if !strings.Contains(out, "rotated") {
		t.Fatalf("rotate said %q", out)
	}
	if bytes.Equal(receiverEnvelope(t, r), oldEnv) {
		t.Fatal("the receiver's envelope did not change")
	}
	before := r.encFolder("docs").Receiver.Records
	secret := []byte("SECRET-AFTER-ROTATION-marker")
	writeFile(t, filepath.Join(dirA, "after.txt"), append(bytes.Repeat(secret, 100), '\n'), 0o644)
	writeFile(t, filepath.Join(dirA, "notes.txt"), append([]byte("edited after the rotation: "), secret...), 0o644)
	a.cli("scan", "docs")
	testutil.Eventually(t, converge, "r to store the changes made after the rotation", func() bool {
		st := r.encFolder("docs")
		return st.Receiver != nil && st.Receiver.Records >= before+2
	})
	waitBackedUp(t, a, r, "docs")

	// The new password recovers old and new.
	home := newDeviceFor(t, r, "docs")
	dst := filepath.Join(t.TempDir(), "new-password")
	mustRun(t, home, recoverArgs(r, "docs", newPw, dst)...)
	if d := diffTrees(snapshot(t, dirA), snapshot(t, dst)); d != "" {
		t.Fatalf("recovered with the new password: %s", d)
	}
	// The old one opens nothing.
	res := run(t, home, recoverArgs(r, "docs", oldPw, filepath.Join(t.TempDir(), "old-password"))...)
	if res.code == 0 || !strings.Contains(res.stderr, "wrong password") {
		t.Fatalf("recover with the old password: exit %d, stderr %q", res.code, res.stderr)
	}

	// An old envelope kept, against the store as it is now.
	if err := a.stop(); err != nil {
		t.Fatal(err)
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	setReceiverEnvelope(t, r, oldEnv)
	r = startNodeIn(t, "r", r.home)
	leak := filepath.Join(t.TempDir(), "old-key")
	res = run(t, newDeviceFor(t, r, "docs"), recoverArgs(r, "docs", oldPw, leak)...)
	if res.code == 0 {
		t.Fatal("recover with the old key read everything after the rotation")
	}
	got := snapshot(t, leak)
	if _, ok := got["after.txt"]; ok {
		t.Error("the old key recovered a file written after the rotation")
	}
	if b, err := os.ReadFile(filepath.Join(leak, "notes.txt")); err != nil || string(b) != "written before the rotation\n" {
		t.Errorf("with the old key notes.txt is %q (%v), want its version from before the rotation", b, err)
	}
	if _, ok := got["photo.bin"]; !ok {
		t.Error("the old key no longer recovers what was there before the rotation")
	}
	scanFor(t, "what the old key recovered", concatFiles(t, leak), [][]byte{secret})
}

// receiverEnvelope reads a receiver's envelope of folder docs from its
// database (read-only, while it runs).
func receiverEnvelope(t testing.TB, r *node) []byte {
	t.Helper()
	d, err := sql.Open("sqlite3", "file:"+filepath.Join(r.home, "lockstep.db")+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var env []byte
	if err := d.QueryRow(`SELECT envelope FROM receiver_envelopes WHERE folder_id = 'docs'`).Scan(&env); err != nil {
		t.Fatal(err)
	}
	return env
}

// setReceiverEnvelope puts env back as a stopped receiver's envelope of
// docs.
func setReceiverEnvelope(t testing.TB, r *node, env []byte) {
	t.Helper()
	d, err := sql.Open("sqlite3", filepath.Join(r.home, "lockstep.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, err := d.Exec(`UPDATE receiver_envelopes SET envelope = ? WHERE folder_id = 'docs'`, env); err != nil {
		t.Fatal(err)
	}
}

// concatFiles returns every regular file's content under dir.
func concatFiles(t testing.TB, dir string) []byte {
	t.Helper()
	var all []byte
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, b...)
		}
		return nil
	})
	return all
}

// TestRotateKeyReachesOtherDevice: a trusted device that did not rotate
// sees records sealed with a key it lacks, says so (not "tampered"), and
// takes the new ring when it shares the folder again with the new
// password; what it writes then is out of the old key's reach too.
func TestRotateKeyReachesOtherDevice(t *testing.T) {
	if testing.Short() {
		t.Skip("long end-to-end test")
	}
	a, b, r := startNode(t, "a"), startNode(t, "b"), startNode(t, "r")
	dirA, dirB := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	writeFile(t, filepath.Join(dirA, "notes.txt"), []byte("before\n"), 0o644)
	a.cli("device", "add", b.ID, "--address", b.Listen)
	b.cli("device", "add", a.ID, "--address", a.Listen)
	a.cli("folder", "add", "docs", dirA)
	b.cli("folder", "add", "docs", dirB)
	a.cli("folder", "share", "docs", b.ID)
	b.cli("folder", "share", "docs", a.ID)
	holdFolder(t, r, "docs", a, b)
	oldPw, newPw := passwordFile(t, "old password"), passwordFile(t, "new password")
	backUpTo(t, a, r, "docs", oldPw)
	backUpTo(t, b, r, "docs", oldPw)
	waitSame(t, converge, dirA, dirB)
	waitBackedUp(t, b, r, "docs")
	oldEnv := receiverEnvelope(t, r)

	a.cli("folder", "share", "docs", r.ID, "--password-file", oldPw, "--new-password-file", newPw, "--rotate-key")
	// b must not get a's new file from a directly: it would upload its own
	// copy, sealed with its old key.
	b.cli("device", "pause", a.ID)
	writeFile(t, filepath.Join(dirA, "from-a.txt"), []byte("SECRET-A-after-rotation\n"), 0o644)
	a.cli("scan", "docs")
	testutil.Eventually(t, converge, "b to report records under a key it lacks", func() bool {
		_, _, e := b.encFolder("docs").peer(r.ID)
		return strings.Contains(e, "newer folder key")
	})
	if st := b.encFolder("docs"); st.TamperedRecords != 0 {
		t.Errorf("b counts %d records sealed with the new key as tampered", st.TamperedRecords)
	}

	b.cli("folder", "share", "docs", r.ID, "--password-file", newPw)
	before := r.encFolder("docs").Receiver.Records
	writeFile(t, filepath.Join(dirB, "from-b.txt"), []byte("SECRET-B-after-rotation\n"), 0o644)
	b.cli("scan", "docs")
	testutil.Eventually(t, converge, "r to store b's new file", func() bool {
		return r.encFolder("docs").Receiver.Records > before
	})
	waitBackedUp(t, b, r, "docs")
	testutil.Eventually(t, converge, "b to read a's file from r", func() bool {
		_, err := os.Stat(filepath.Join(dirB, "from-a.txt"))
		return err == nil
	})

	for _, n := range []*node{a, b, r} {
		if err := n.stop(); err != nil {
			t.Fatal(err)
		}
	}
	setReceiverEnvelope(t, r, oldEnv)
	r = startNodeIn(t, "r", r.home)
	leak := filepath.Join(t.TempDir(), "old-key")
	run(t, newDeviceFor(t, r, "docs"), recoverArgs(r, "docs", oldPw, leak)...)
	if _, err := os.ReadFile(filepath.Join(leak, "notes.txt")); err != nil {
		t.Errorf("the old key does not recover what was there before: %v", err)
	}
	scanFor(t, "what the old key recovered", concatFiles(t, leak), [][]byte{[]byte("SECRET-A"), []byte("SECRET-B")})
}
