package test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "github.com/mattn/go-sqlite3"
	"github.com/zeebo/blake3"

	"lockstep/storage/blob"
	"lockstep/storage/blob/s3"
	"lockstep/storage/blob/s3/s3test"
	"lockstep/sync/receiver/pack"
	"lockstep/test/testutil"
)

// receiverFolder is the part of a folder's status the receiver tests read.
type receiverFolder struct {
	ID              string `json:"id"`
	State           string `json:"state"`
	Error           string `json:"error"`
	NeedFiles       int64  `json:"needFiles"`
	GlobalFiles     int64  `json:"globalFiles"`
	TamperedRecords int64  `json:"tamperedRecords"`
	TamperedChunks  int64  `json:"tamperedChunks"`
	Peers           []struct {
		Device     string  `json:"device"`
		Connected  bool    `json:"connected"`
		Completion float64 `json:"completion"`
		Untrusted  bool    `json:"untrusted"`
		Error      string  `json:"error"`
	} `json:"peers"`
	Receiver *struct {
		Records         int64   `json:"records"`
		Files           int64   `json:"files"`
		Chunks          int64   `json:"chunks"`
		StoredBytes     int64   `json:"storedBytes"`
		ReferencedBytes int64   `json:"referencedBytes"`
		DedupRatio      float64 `json:"dedupRatio"`
		LogSequence     int64   `json:"logSequence"`
	} `json:"receiver"`
}

// encFolder returns the status of folder id on n.
func (n *node) encFolder(id string) receiverFolder {
	n.t.Helper()
	for _, raw := range n.status().Folders {
		var f receiverFolder
		if err := json.Unmarshal(raw, &f); err != nil {
			n.t.Fatal(err)
		}
		if f.ID == id {
			return f
		}
	}
	n.t.Fatalf("%s has no folder %q", n.name, id)
	return receiverFolder{}
}

// peer returns f's entry for device id.
func (f receiverFolder) peer(id string) (completion float64, connected bool, errText string) {
	for _, p := range f.Peers {
		if p.Device == id {
			return p.Completion, p.Connected, p.Error
		}
	}
	return 0, false, ""
}

// passwordFile writes a password file and returns its path.
func passwordFile(t testing.TB, pw string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(p, []byte(pw+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// holdFolder makes receiver r hold folder id for the trusted devices.
func holdFolder(t testing.TB, r *node, id string, trusted ...*node) {
	t.Helper()
	r.cli("folder", "add", id, filepath.Join(t.TempDir(), r.name+"-"+id), "--type", "encrypted")
	for _, d := range trusted {
		r.cli("device", "add", d.ID, "--name", d.name, "--address", d.Listen)
		r.cli("folder", "share", id, d.ID)
	}
}

// backUpTo shares folder id of trusted device d with receiver r.
func backUpTo(t testing.TB, d, r *node, id, pwFile string) {
	t.Helper()
	d.cli("device", "add", r.ID, "--name", r.name, "--address", r.Listen, "--untrusted")
	testutil.Eventually(t, 30*time.Second, d.name+" connected to "+r.name, func() bool { return d.connectedTo(r.ID) })
	d.cli("folder", "share", id, r.ID, "--password-file", pwFile)
}

// backUp has receiver r hold d's folder id, shares it with r under the
// password in pwFile, and waits until r holds every file of it.
func backUp(t testing.TB, d, r *node, id, pwFile string) {
	t.Helper()
	holdFolder(t, r, id, d)
	backUpTo(t, d, r, id, pwFile)
	waitBackedUp(t, d, r, id)
}

// waitBackedUp waits until receiver r holds every file of d's folder id.
func waitBackedUp(t testing.TB, d, r *node, id string) {
	t.Helper()
	testutil.Eventually(t, converge, r.name+" to hold "+d.name+"'s folder", func() bool {
		c, _, _ := d.encFolder(id).peer(r.ID)
		return c == 100
	})
}

// secretTree writes a tree whose names and contents the receivers must
// never see, and returns the strings and hashes to look for.
func secretTree(t testing.TB, root string) (needles [][]byte) {
	t.Helper()
	files := map[string][]byte{
		"zebra-passport-scan.txt":                  []byte("CONFIDENTIAL-MARKER-alpha: the zebra's passport number is 12345\n"),
		"quokka-notes/diary-entry-0001.md":         []byte("CONFIDENTIAL-MARKER-bravo: dear diary\n"),
		"quokka-notes/nested-vault/tax-return.pdf": append([]byte("CONFIDENTIAL-MARKER-charlie"), randomBytes(11, 300_000)...),
		"quokka-notes/nested-vault/empty-secret":   nil,
		"größe-ünïcode-wombat.bin":                 randomBytes(12, 3<<20),
	}
	for name, data := range files {
		writeFile(t, filepath.Join(root, name), data, 0o640)
		for _, part := range strings.Split(name, "/") {
			needles = append(needles, []byte(part))
		}
		if len(data) > 0 {
			h := blake3.Sum256(data)
			needles = append(needles, h[:], []byte(hex.EncodeToString(h[:])))
		}
	}
	if err := os.Symlink("zebra-passport-scan.txt", filepath.Join(root, "platypus-link")); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "echidna-empty-dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	return append(needles, []byte("platypus-link"), []byte("echidna-empty-dir"),
		[]byte("CONFIDENTIAL-MARKER"), randomBytes(12, 3<<20)[1<<20:1<<20+64])
}

// scanFor fails the test if any needle occurs in data.
func scanFor(t testing.TB, where string, data []byte, needles [][]byte) {
	t.Helper()
	for _, n := range needles {
		if bytes.Contains(data, n) {
			t.Errorf("%s contains %q", where, n)
		}
	}
}

// scanDir scans every file under dir.
func scanDir(t testing.TB, dir string, needles [][]byte) int64 {
	t.Helper()
	var total int64
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		total += int64(len(data))
		scanFor(t, p, data, needles)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return total
}

// scanBucket scans every object in an S3 bucket.
func scanBucket(t testing.TB, cfg s3.Config, needles [][]byte) int64 {
	t.Helper()
	ctx := context.Background()
	st, err := s3.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var total int64
	var keys []string
	if err := st.List(ctx, "", func(i blob.Info) error { keys = append(keys, i.Key); return nil }); err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		err := st.Get(ctx, k, func(r io.Reader) error {
			data, err := io.ReadAll(r)
			total += int64(len(data))
			scanFor(t, "object "+k, data, needles)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return total
}

// TestEncryptedBackupAndRecover: two trusted devices back a folder up to a
// receiver on S3 and one on a local directory; neither receiver stores a
// name, content or plaintext hash; a brand-new device recovers the folder
// from one receiver with the password alone.
func TestEncryptedBackupAndRecover(t *testing.T) {
	if testing.Short() {
		t.Skip("long end-to-end test")
	}
	cfg := s3test.Start(t)
	t.Setenv("LOCKSTEP_S3_ACCESS_KEY", cfg.AccessKey)
	t.Setenv("LOCKSTEP_S3_SECRET_KEY", cfg.SecretKey)

	a, b := startNode(t, "a"), startNode(t, "b")
	r1 := startNode(t, "r1", "--s3-endpoint", cfg.Endpoint, "--s3-bucket", cfg.Bucket, "--s3-insecure")
	r2 := startNode(t, "r2")
	pw, wrong := passwordFile(t, "correct horse battery staple"), passwordFile(t, "Tr0ub4dor&3")

	dirA, dirB := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	needles := secretTree(t, dirA)
	a.cli("device", "add", b.ID, "--address", b.Listen)
	b.cli("device", "add", a.ID, "--address", a.Listen)
	a.cli("folder", "add", "docs", dirA)
	b.cli("folder", "add", "docs", dirB)
	a.cli("folder", "share", "docs", b.ID)
	b.cli("folder", "share", "docs", a.ID)

	for _, r := range []*node{r1, r2} {
		holdFolder(t, r, "docs", a, b)
	}
	// The receivers replicate between themselves too.
	r1.cli("device", "add", r2.ID, "--address", r2.Listen)
	r2.cli("device", "add", r1.ID, "--address", r1.Listen)
	r1.cli("folder", "share", "docs", r2.ID)
	r2.cli("folder", "share", "docs", r1.ID)

	backUpTo(t, a, r1, "docs", pw)
	backUpTo(t, a, r2, "docs", pw)
	waitSame(t, converge, dirA, dirB)

	// b joins the receivers: a wrong password is refused and makes no key.
	b.cli("device", "add", r1.ID, "--address", r1.Listen, "--untrusted")
	testutil.Eventually(t, 30*time.Second, "b connected to r1", func() bool { return b.connectedTo(r1.ID) })
	res := run(t, b.home, "folder", "share", "docs", r1.ID, "--password-file", wrong)
	if res.code == 0 || !strings.Contains(res.stderr, "wrong password") {
		t.Fatalf("sharing with a wrong password: exit %d, stderr %q", res.code, res.stderr)
	}
	assertOneLineError(t, res)
	b.cli("folder", "share", "docs", r1.ID, "--password-file", pw)
	backUpTo(t, b, r2, "docs", pw)

	// An edit on b reaches a, and both receivers.
	writeFile(t, filepath.Join(dirB, "quokka-notes/diary-entry-0002.md"), []byte("CONFIDENTIAL-MARKER-delta\n"), 0o600)
	needles = append(needles, []byte("diary-entry-0002"))
	waitSame(t, converge, dirA, dirB)
	for _, d := range []*node{a, b} {
		for _, r := range []*node{r1, r2} {
			waitBackedUp(t, d, r, "docs")
		}
	}
	st := r1.encFolder("docs")
	if st.Receiver == nil || st.Receiver.Records == 0 || st.Receiver.Chunks == 0 {
		t.Fatalf("r1's status shows nothing stored: %+v", st)
	}
	t.Logf("r1 stores %d records, %d chunks, %d bytes, dedup ratio %.2f", st.Receiver.Records, st.Receiver.Chunks, st.Receiver.StoredBytes, st.Receiver.DedupRatio)

	// Nothing readable on the receivers: databases (with WAL), blob
	// directories, logs, and the bucket.
	for _, r := range []*node{r1, r2} {
		n := scanDir(t, r.home, needles)
		scanFor(t, r.name+"'s log", []byte(r.log.String()), needles)
		t.Logf("%s: scanned %d bytes of its home", r.name, n)
	}
	t.Logf("r1: scanned %d bytes in the bucket", scanBucket(t, cfg, needles))

	// Both trusted devices go away; a new one recovers from r1 alone.
	if err := a.stop(); err != nil {
		t.Fatal(err)
	}
	if err := b.stop(); err != nil {
		t.Fatal(err)
	}
	newHome := newDeviceFor(t, r1, "docs")
	dst := filepath.Join(t.TempDir(), "recovered")
	res = run(t, newHome, recoverArgs(r1, "docs", wrong, dst)...)
	if res.code == 0 {
		t.Fatal("recover with a wrong password succeeded")
	}
	assertOneLineError(t, res)
	if _, err := os.Stat(dst); !os.IsNotExist(err) {
		t.Fatalf("recover with a wrong password left %s behind (%v)", dst, err)
	}
	mustRun(t, newHome, recoverArgs(r1, "docs", pw, dst)...)
	if d := diffTrees(snapshot(t, dirA), snapshot(t, dst)); d != "" {
		t.Fatalf("recovered tree differs from the original:\n%s", d)
	}
}

// newDeviceFor makes a brand-new device (a home with nothing but its
// identity) that receiver r serves folder to, and returns its home.
func newDeviceFor(t testing.TB, r *node, folder string) string {
	t.Helper()
	home := filepath.Join(t.TempDir(), "new")
	id := lastLine(mustRun(t, home, "init"))
	r.cli("device", "add", id, "--name", "new")
	r.cli("folder", "share", folder, id)
	return home
}

// recoverArgs is the recover command of folder from r into dst.
func recoverArgs(r *node, folder, pwFile, dst string) []string {
	return []string{"recover", "--from", r.Listen, "--device", r.ID, "--folder", folder, "--password-file", pwFile, "--to", dst}
}

// recoverSame recovers folder from r on a brand-new device and checks the
// tree equals want's.
func recoverSame(t testing.TB, r *node, folder, pwFile, want string) {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "recovered")
	mustRun(t, newDeviceFor(t, r, folder), recoverArgs(r, folder, pwFile, dst)...)
	if d := diffTrees(snapshot(t, want), snapshot(t, dst)); d != "" {
		t.Fatalf("recovered tree differs from the original:\n%s", d)
	}
}

// restart starts n again on its home, as the same device.
func (n *node) restart(t testing.TB, extra ...string) *node {
	t.Helper()
	if err := n.stop(); err != nil {
		t.Fatalf("stopping %s: %v", n.name, err)
	}
	return startNodeIn(t, n.name, n.home, extra...)
}

// copyTree copies a directory tree of regular files.
func copyTree(t testing.TB, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		target := filepath.Join(to, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o700)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, info.Mode().Perm())
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestReceiverRollback: a receiver put back to an older copy of itself is
// refused with a clear error.
func TestReceiverRollback(t *testing.T) {
	if testing.Short() {
		t.Skip("long end-to-end test")
	}
	a, r := startNode(t, "a"), startNode(t, "r")
	dir := filepath.Join(t.TempDir(), "a")
	writeFile(t, filepath.Join(dir, "one"), []byte("first"), 0o644)
	a.cli("folder", "add", "docs", dir)
	holdFolder(t, r, "docs", a)
	backUpTo(t, a, r, "docs", passwordFile(t, "pw"))
	waitBackedUp(t, a, r, "docs")

	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	old := filepath.Join(t.TempDir(), "r-old")
	copyTree(t, r.home, old)
	r = startNodeIn(t, "r", r.home)
	writeFile(t, filepath.Join(dir, "two"), []byte("second"), 0o644)
	a.cli("scan", "docs")
	testutil.Eventually(t, converge, "r to hold the second file", func() bool {
		st := r.encFolder("docs")
		return st.Receiver != nil && st.Receiver.LogSequence >= 2
	})
	waitBackedUp(t, a, r, "docs")

	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(r.home); err != nil {
		t.Fatal(err)
	}
	copyTree(t, old, r.home)
	r = startNodeIn(t, "r", r.home)
	testutil.Eventually(t, converge, "a to refuse the rolled-back receiver", func() bool {
		_, _, e := a.encFolder("docs").peer(r.ID)
		return strings.Contains(e, "rolled back")
	})
	_, _, e := a.encFolder("docs").peer(r.ID)
	t.Logf("a reports: %s", e)
}

// TestReceiverRebuildFromBucket: a receiver on S3 whose database is lost
// rebuilds it from the bucket, and carries on where it was.
func TestReceiverRebuildFromBucket(t *testing.T) {
	if testing.Short() {
		t.Skip("long end-to-end test")
	}
	cfg := s3test.Start(t)
	t.Setenv("LOCKSTEP_S3_ACCESS_KEY", cfg.AccessKey)
	t.Setenv("LOCKSTEP_S3_SECRET_KEY", cfg.SecretKey)
	s3flags := []string{"--s3-endpoint", cfg.Endpoint, "--s3-bucket", cfg.Bucket, "--s3-insecure"}
	a, r := startNode(t, "a"), startNode(t, "r", s3flags...)
	dir := filepath.Join(t.TempDir(), "a")
	for i := range 20 {
		writeFile(t, filepath.Join(dir, "d", string(rune('a'+i))), randomBytes(uint64(i), 1000*i), 0o644)
	}
	writeFile(t, filepath.Join(dir, "big"), randomBytes(99, 2<<20), 0o644)
	a.cli("folder", "add", "docs", dir)
	holdFolder(t, r, "docs", a)
	pw := passwordFile(t, "pw")
	backUpTo(t, a, r, "docs", pw)
	waitBackedUp(t, a, r, "docs")
	before := r.encFolder("docs").Receiver

	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	for _, suffix := range []string{"", "-wal", "-shm"} {
		if err := os.Remove(filepath.Join(r.home, "lockstep.db"+suffix)); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	r = startNodeIn(t, "r", r.home, s3flags...)
	after := r.encFolder("docs").Receiver
	if after == nil || after.Records != before.Records || after.Chunks != before.Chunks || after.LogSequence != before.LogSequence || after.StoredBytes != before.StoredBytes {
		t.Fatalf("rebuilt receiver holds %+v (status %+v), before %+v", after, r.encFolder("docs"), before)
	}
	// a reconnects without a rollback error, and backs up a new file.
	writeFile(t, filepath.Join(dir, "new"), []byte("after the rebuild"), 0o644)
	a.cli("scan", "docs")
	testutil.Eventually(t, converge, "r to hold the new file", func() bool {
		st := r.encFolder("docs")
		return st.Receiver != nil && st.Receiver.LogSequence > before.LogSequence
	})
	waitBackedUp(t, a, r, "docs")
	if _, _, e := a.encFolder("docs").peer(r.ID); e != "" {
		t.Fatalf("a reports a problem with the rebuilt receiver: %s", e)
	}
	// And the rebuilt receiver still restores the folder.
	if err := a.stop(); err != nil {
		t.Fatal(err)
	}
	recoverSame(t, r, "docs", pw, dir)
}

// TestReceiverDedup: changing 1 MiB inside a large file grows the
// receiver's store by a few chunks, not by the file.
func TestReceiverDedup(t *testing.T) {
	if testing.Short() {
		t.Skip("long end-to-end test")
	}
	a, r := startNode(t, "a"), startNode(t, "r")
	dir := filepath.Join(t.TempDir(), "a")
	const size = 64 << 20
	data := randomBytes(5, size)
	writeFile(t, filepath.Join(dir, "big"), data, 0o644)
	a.cli("folder", "add", "docs", dir)
	holdFolder(t, r, "docs", a)
	backUpTo(t, a, r, "docs", passwordFile(t, "pw"))
	waitBackedUp(t, a, r, "docs")
	before := r.encFolder("docs").Receiver

	copy(data[size/2:], randomBytes(6, 1<<20))
	writeFile(t, filepath.Join(dir, "big"), data, 0o644)
	a.cli("scan", "docs")
	testutil.Eventually(t, converge, "r to hold the new version", func() bool {
		st := r.encFolder("docs")
		return st.Receiver != nil && st.Receiver.Records > before.Records
	})
	waitBackedUp(t, a, r, "docs")
	after := r.encFolder("docs").Receiver
	growth := after.StoredBytes - before.StoredBytes
	t.Logf("a %d MiB file stored as %d bytes in %d chunks; after changing 1 MiB inside it the store grew by %d bytes (%d chunks); dedup ratio %.2f",
		size>>20, before.StoredBytes, before.Chunks, growth, after.Chunks-before.Chunks, after.DedupRatio)
	if growth <= 0 || growth > 8<<20 {
		t.Fatalf("store grew by %d bytes for a 1 MiB change", growth)
	}
}

// damageChunks damages every sealed chunk a receiver with a local store
// holds, each in one of three ways in turn: a flipped bit, a truncation,
// or the body of another chunk. A chunk in a pack keeps its place and
// length (the receiver serves the range its database names): a
// truncation there zeroes its last bytes, and another chunk's body is
// cut or padded to fit.
func damageChunks(t testing.TB, home string) int {
	t.Helper()
	var paths, packs []string
	filepath.WalkDir(filepath.Join(home, "blobs"), func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil || !d.Type().IsRegular():
		case strings.Contains(filepath.ToSlash(p), "/c/"):
			paths = append(paths, p)
		case strings.Contains(filepath.ToSlash(p), "/p/"):
			packs = append(packs, p)
		}
		return nil
	})
	bodies := make([][]byte, len(paths))
	for i, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		bodies[i] = b
	}
	damage := func(i int, b, other []byte) []byte {
		switch i % 3 {
		case 0:
			b[len(b)/2] ^= 0x10
		case 1:
			b = b[:len(b)-min(7, len(b)-1)]
		case 2:
			b = other
		}
		return b
	}
	for i, p := range paths {
		b := damage(i, bytes.Clone(bodies[i]), bodies[(i+1)%len(paths)])
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	n := len(paths)
	for _, p := range packs {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		entries, err := pack.Parse(data)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		orig := bytes.Clone(data)
		for j, e := range entries {
			body := data[e.Offset : e.Offset+e.Length]
			next := entries[(j+1)%len(entries)]
			other := orig[next.Offset : next.Offset+next.Length]
			if len(entries) == 1 {
				other = bytes.Repeat([]byte{0x5a}, len(body))
			}
			got := damage(n, bytes.Clone(body), other)
			clear(body)
			copy(body, got)
			n++
		}
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if n < 3 {
		t.Fatalf("found %d chunks to damage", n)
	}
	t.Logf("damaged %d chunk blobs and %d chunks in %d packs", len(paths), n-len(paths), len(packs))
	return n
}

// damageRecord flips a bit in one sealed record in a stopped receiver's
// database.
func damageRecord(t testing.TB, home string) {
	t.Helper()
	d, err := sql.Open("sqlite3", filepath.Join(home, "lockstep.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var seq int64
	var sealed []byte
	if err := d.QueryRow(`SELECT seq, sealed FROM receiver_records ORDER BY seq LIMIT 1`).Scan(&seq, &sealed); err != nil {
		t.Fatal(err)
	}
	sealed[len(sealed)/2] ^= 1
	if _, err := d.Exec(`UPDATE receiver_records SET sealed = ? WHERE seq = ?`, sealed, seq); err != nil {
		t.Fatal(err)
	}
}

// TestReceiverTamper: damaged chunks and records on a receiver are
// detected, never written into a folder, reported, and fetched from a
// trusted device once one is back; recover from the damaged receiver
// restores what it can verify and says what it could not.
func TestReceiverTamper(t *testing.T) {
	if testing.Short() {
		t.Skip("long end-to-end test")
	}
	a, b, r := startNode(t, "a"), startNode(t, "b"), startNode(t, "r")
	dirA, dirB := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	for i := range 6 {
		writeFile(t, filepath.Join(dirA, "small-"+string(rune('a'+i))), randomBytes(uint64(20+i), 1000+i*5000), 0o644)
	}
	writeFile(t, filepath.Join(dirA, "large"), randomBytes(30, 1<<20), 0o644)
	a.cli("folder", "add", "docs", dirA)
	a.cli("device", "add", b.ID, "--address", b.Listen)
	b.cli("device", "add", a.ID, "--address", a.Listen)
	holdFolder(t, r, "docs", a, b)
	pw := passwordFile(t, "pw")
	backUpTo(t, a, r, "docs", pw)
	waitBackedUp(t, a, r, "docs")

	if err := a.stop(); err != nil {
		t.Fatal(err)
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	n := damageChunks(t, r.home)
	damageRecord(t, r.home)
	r = startNodeIn(t, "r", r.home)

	// b starts the folder with only the damaged receiver reachable.
	b.cli("folder", "add", "docs", dirB)
	b.cli("folder", "share", "docs", a.ID)
	backUpTo(t, b, r, "docs", pw)
	testutil.Eventually(t, converge, "b to notice the damage", func() bool {
		st := b.encFolder("docs")
		return st.TamperedChunks > 0 && st.TamperedRecords > 0
	})
	time.Sleep(time.Second) // let any (wrong) write land before looking
	st := b.encFolder("docs")
	_, _, e := st.peer(r.ID)
	t.Logf("b: %d damaged chunks of %d, %d damaged records; reports %q", st.TamperedChunks, n, st.TamperedRecords, e)
	if !strings.Contains(e, "failed verification") {
		t.Errorf("b's status for r says %q", e)
	}
	want := snapshot(t, dirA)
	for name, got := range snapshot(t, dirB) {
		if got.Type == "file" && got.Hash != want[name].Hash {
			t.Errorf("b wrote %s with content from the damaged receiver", name)
		}
	}

	// Recover from the damaged receiver: non-zero exit naming the damage;
	// what it could verify is there.
	dst := filepath.Join(t.TempDir(), "recovered")
	res := run(t, newDeviceFor(t, r, "docs"), recoverArgs(r, "docs", pw, dst)...)
	if res.code == 0 || !strings.Contains(res.stderr, "verif") {
		t.Fatalf("recover from a damaged receiver: exit %d, stderr %q", res.code, res.stderr)
	}
	for name, got := range snapshot(t, dst) {
		if got.Type == "file" && got.Hash != want[name].Hash {
			t.Errorf("recover wrote %s with damaged content", name)
		}
	}
	// Every chunk was damaged, the small files' inside packs: none of them
	// can have been verified.
	for i := range 6 {
		if _, err := os.Lstat(filepath.Join(dst, "small-"+string(rune('a'+i)))); err == nil {
			t.Errorf("recover wrote small-%c, whose packed chunk was damaged", 'a'+i)
		}
	}

	// With a back, b gets everything from it.
	a = startNodeIn(t, "a", a.home)
	a.cli("folder", "share", "docs", b.ID)
	waitSame(t, converge, dirA, dirB)
}
