package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sync/semaphore"

	"lockstep/chunk"
	"lockstep/crypt"
	"lockstep/storage/db"
	"lockstep/storage/syncahead"
	"lockstep/sync/fsys"
	"lockstep/sync/index"
)

// idleFolder returns folder "f" of an engine that is not served, so the
// test alone reads its pull and scan signals.
func idleFolder(t *testing.T) *folder {
	t.Helper()
	d, err := db.Open(filepath.Join(t.TempDir(), "l.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	cfg := db.Folder{ID: "f", Path: t.TempDir(), Type: db.SendReceive}
	if err := d.PutFolder(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	e := newWired(crypt.DeviceID{9}, d)
	f, err := newFolder(context.Background(), e, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.fs.Close() })
	return f
}

// announce stores records of a peer as its index update would, and
// signals the pull.
func announce(t *testing.T, f *folder, peer crypt.DeviceID, recs ...index.Record) {
	t.Helper()
	if err := f.set.UpdateRemote(context.Background(), peer, recs); err != nil {
		t.Fatal(err)
	}
	f.requestPull()
}

func peerFile(peer crypt.DeviceID, name string, typ index.Type, counter uint64) index.Record {
	return index.Record{Name: name, Type: typ, Size: 1, Version: index.Vector{{ID: peer.Short(), Value: counter}}, Sequence: int64(counter)}
}

// TestPullJoins: files a peer announces while a pull is running join it;
// directories, deletions and a file already taken wait for the next pull,
// as does everything once a scan is waiting.
func TestPullJoins(t *testing.T) {
	peer := crypt.DeviceID{1}
	f := idleFolder(t)
	announce(t, f, peer, peerFile(peer, "a", index.File, 1))
	<-f.pullCh // the pull that starts now takes it

	work := make(chan *index.Record)
	through := make(chan struct{}, 4)
	fed := make(chan struct{})
	go func() {
		f.feed(context.Background(), f.set.Need(), work, through)
		close(fed)
	}()
	take := func() string {
		t.Helper()
		select {
		case r := <-work:
			return r.Name
		case <-time.After(10 * time.Second):
			t.Fatal("nothing handed to the workers")
			return ""
		}
	}
	if got := take(); got != "a" {
		t.Fatalf("first item %q, want a", got)
	}
	// While a is being pulled: a new file joins; a directory, a new
	// version of a, and a deleted file wait.
	gone := peerFile(peer, "gone", index.File, 5)
	gone.Deleted = true
	announce(t, f, peer, peerFile(peer, "b", index.File, 2), peerFile(peer, "d", index.Dir, 3), peerFile(peer, "a", index.File, 4))
	if got := take(); got != "b" {
		t.Fatalf("joined %q, want b", got)
	}
	// A scan is waiting: nothing more joins.
	f.scanCh <- struct{}{}
	announce(t, f, peer, peerFile(peer, "c", index.File, 6), gone)
	through <- struct{}{}
	through <- struct{}{}
	select {
	case r := <-work:
		t.Fatalf("%q joined while a scan was waiting", r.Name)
	case <-fed:
	case <-time.After(10 * time.Second):
		t.Fatal("feed did not return when the workers were through")
	}
	select {
	case <-f.pullCh:
	default:
		t.Fatal("what was left is not pulled next")
	}
}

// TestPullCanceledReturns: a pull whose context ends while its workers
// finish items quickly returns. Workers used to block reporting an item to
// a feeder that had stopped reading, and the pull never ended.
func TestPullCanceledReturns(t *testing.T) {
	peer := crypt.DeviceID{1}
	f := idleFolder(t)
	var recs []index.Record
	for i := range 300 {
		recs = append(recs, peerFile(peer, fmt.Sprintf("f%03d", i), index.File, uint64(i+1)))
	}
	announce(t, f, peer, recs...)
	fail := func(*index.Record, error) {} // no peer is connected: every item fails at once
	for i := range 200 {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			f.pullFiles(ctx, f.set.Need(), fail)
			close(done)
		}()
		time.Sleep(time.Duration(i%8) * 200 * time.Microsecond)
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("run %d: the canceled pull did not return", i)
		}
	}
}

// TestPullBarriersAhead: a pull that writes more than syncahead.Every
// bytes makes barriers in the background, so that its files' fsyncs find
// little left to flush.
func TestPullBarriersAhead(t *testing.T) {
	full, empty := t.TempDir(), t.TempDir()
	data := make([]byte, syncahead.Every+(1<<20))
	if _, err := rand.NewChaCha8([32]byte{'p'}).Read(data); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(full, "big"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	idA, idB := crypt.DeviceID{9}, crypt.DeviceID{1}
	b := startEngineWith(t, idB, 0, empty, db.Device{ID: idA.String()})
	a := startEngineWith(t, idA, 0, full, db.Device{ID: idB.String()})
	fb := b.folder("f")
	var barriers atomic.Int64
	fb.ahead = syncahead.New(func() error {
		barriers.Add(1)
		return fb.fs.Sync()
	})
	connect(t, a, b)
	waitFor(t, "b to pull the file", func() bool {
		st, _ := b.FolderStatus("f")
		return st.LocalFiles == 1 && st.NeedFiles == 0
	})
	if got, err := os.ReadFile(filepath.Join(empty, "big")); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("big: %d bytes, %v", len(got), err)
	}
	if barriers.Load() == 0 {
		t.Error("no barrier in the background")
	}
}

// TestFailedPullShowsError: a pull that fails leaves the folder in error
// with the reason, not idle; the error goes once a pull goes through.
func TestFailedPullShowsError(t *testing.T) {
	peer := crypt.DeviceID{1}
	f := idleFolder(t)
	r := peerFile(peer, "x", index.File, 1)
	r.Blocks = []index.Block{{Size: 1}}
	announce(t, f, peer, r)
	if retry := f.runPull(context.Background()); !retry {
		t.Fatal("a failed pull asks for no retry")
	}
	shown := func() (string, string) {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.shownState(), f.err
	}
	if state, msg := shown(); state != StateError || !strings.Contains(msg, "x: ") || !strings.Contains(msg, "no connected device has it") {
		t.Fatalf("after a failed pull: state %q, error %q", state, msg)
	}
	gone := peerFile(peer, "x", index.File, 2)
	gone.Deleted = true
	announce(t, f, peer, gone)
	if retry := f.runPull(context.Background()); retry {
		t.Fatal("the deletion failed")
	}
	if state, msg := shown(); state != StateIdle || msg != "" {
		t.Fatalf("after a pull went through: state %q, error %q", state, msg)
	}
}

// TestPullResumesPartial: a pull interrupted after it wrote some blocks
// of a file resumes from them: what its partial file holds, checked
// against the blocks' hashes, is not fetched again. Here the partial
// holds every block and no peer is connected: only a resume can finish.
// A partial block that does not match its hash is fetched.
func TestPullResumesPartial(t *testing.T) {
	peer := crypt.DeviceID{1}
	f := idleFolder(t)
	dir := f.config().Path
	data := make([]byte, 3*chunk.MinSize)
	if _, err := rand.NewChaCha8([32]byte{'r'}).Read(data); err != nil {
		t.Fatal(err)
	}
	r := peerFile(peer, "big.bin", index.File, 1)
	r.Size = int64(len(data))
	r.Blocks = nil
	for off := 0; off < len(data); off += chunk.MinSize {
		b := data[off : off+chunk.MinSize]
		r.Blocks = append(r.Blocks, index.Block{Offset: int64(off), Size: uint32(len(b)), Hash: chunk.HashOf(b)})
	}
	partial := filepath.Join(dir, filepath.FromSlash(fsys.PartialName("big.bin")))
	if err := os.WriteFile(partial, data, 0o600); err != nil {
		t.Fatal(err)
	}
	announce(t, f, peer, r)
	if retry := f.runPull(context.Background()); retry {
		t.Fatal("the pull failed though its partial file held every block")
	}
	if got, err := os.ReadFile(filepath.Join(dir, "big.bin")); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("big.bin: %d bytes, %v", len(got), err)
	}
	if got := f.resumedBytes.Load(); got != int64(len(data)) {
		t.Fatalf("resumed %d bytes, want %d", got, len(data))
	}
	// The record carries the inode of the file in place (taken from the
	// open file before its rename): a scan then reads it no more.
	var st syscall.Stat_t
	if err := syscall.Lstat(filepath.Join(dir, "big.bin"), &st); err != nil {
		t.Fatal(err)
	}
	if l, _ := f.set.Local("big.bin"); l.Inode != st.Ino || l.Inode == 0 {
		t.Fatalf("local record's inode %d, the file's %d", l.Inode, st.Ino)
	}
	// A damaged partial is not trusted: the bad block must be fetched,
	// and with no peer (nor a local copy) the pull fails, keeping the
	// partial.
	other := bytes.Clone(data)
	for i := range other {
		other[i] ^= 0x5a
	}
	r2 := peerFile(peer, "other.bin", index.File, 2)
	r2.Size = int64(len(other))
	r2.Blocks = nil
	for off := 0; off < len(other); off += chunk.MinSize {
		b := other[off : off+chunk.MinSize]
		r2.Blocks = append(r2.Blocks, index.Block{Offset: int64(off), Size: uint32(len(b)), Hash: chunk.HashOf(b)})
	}
	bad := bytes.Clone(other)
	bad[chunk.MinSize+7] ^= 1
	partial2 := filepath.Join(dir, filepath.FromSlash(fsys.PartialName("other.bin")))
	if err := os.WriteFile(partial2, bad, 0o600); err != nil {
		t.Fatal(err)
	}
	announce(t, f, peer, r2)
	if retry := f.runPull(context.Background()); !retry {
		t.Fatal("a pull from a damaged partial with no peer went through")
	}
	if _, err := os.Stat(filepath.Join(dir, "other.bin")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("other.bin written from a damaged partial: %v", err)
	}
	if _, err := os.Stat(partial2); err != nil {
		t.Fatalf("the partial file was not kept for the next try: %v", err)
	}
}

// TestRemoveTempsKeepsPartials: at start, a folder removes the temp files
// a crash left, but keeps partial files for a day for pulls to resume.
func TestRemoveTempsKeepsPartials(t *testing.T) {
	f := idleFolder(t)
	dir := f.config().Path
	partial := filepath.Join(dir, filepath.FromSlash(fsys.PartialName("a")))
	old := filepath.Join(dir, filepath.FromSlash(fsys.PartialName("b")))
	temp := filepath.Join(dir, fsys.TempPrefix+"0123456789abcdef")
	for _, p := range []string{partial, old, temp} {
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	past := time.Now().Add(-partialMaxAge - time.Hour)
	if err := os.Chtimes(old, past, past); err != nil {
		t.Fatal(err)
	}
	f.removeTemps(context.Background(), ".")
	if _, err := os.Stat(partial); err != nil {
		t.Errorf("a fresh partial file was removed: %v", err)
	}
	for _, p := range []string{old, temp} {
		if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s kept: %v", filepath.Base(p), err)
		}
	}
}

// TestChangedLocallyOnceThenFails: a file on disk the index does not know
// (ignored here, say) that a peer announces makes the pull ask for a
// rescan once; when the rescan changes nothing, the next pull does not
// ask again (they looped for good, half a core and gigabytes of log a
// day) but fails, with the folder in error and retries backing off.
func TestChangedLocallyOnceThenFails(t *testing.T) {
	peer := crypt.DeviceID{1}
	f := idleFolder(t)
	if err := os.WriteFile(filepath.Join(f.config().Path, "x"), []byte("local, unindexed"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := peerFile(peer, "x", index.File, 1)
	r.Size = 0
	announce(t, f, peer, r)
	<-f.pullCh
	if !f.runPull(context.Background()) {
		t.Fatal("the pull replaced a file it does not know")
	}
	select {
	case <-f.scanCh:
	default:
		t.Fatal("no rescan asked for the file changed locally")
	}
	if !f.runPull(context.Background()) {
		t.Fatal("the second pull replaced the file")
	}
	select {
	case <-f.scanCh:
		t.Fatal("a rescan asked again for the same file: the pull and the scan loop")
	default:
	}
	f.mu.Lock()
	msg := f.err
	f.mu.Unlock()
	if !strings.Contains(msg, "x: ") {
		t.Fatalf("folder error %q, want the file named", msg)
	}
	b := retryBackoff{min: pullRetryMin, max: pullRetryMax}
	if a, c := b.next(), b.next(); a != pullRetryMin || c != 2*pullRetryMin {
		t.Fatalf("retries after %v then %v", a, c)
	}
}

// TestPartialsGo: a partial file left in a directory that peers delete
// does not keep the directory ("directory not empty" stopped the folder
// for good), and partial files of pulls given up go once the folder
// needs nothing.
func TestPartialsGo(t *testing.T) {
	peer := crypt.DeviceID{1}
	f := idleFolder(t)
	dir := f.config().Path
	if err := os.MkdirAll(filepath.Join(dir, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	me := crypt.DeviceID{9}
	d := index.Record{Name: "d", Type: index.Dir, Mode: 0o755, Version: index.Vector{{ID: me.Short(), Value: 1}}}
	if _, err := f.set.UpdateLocal(context.Background(), []index.Record{d}); err != nil {
		t.Fatal(err)
	}
	partial := filepath.Join(dir, filepath.FromSlash(fsys.PartialName("d/big.bin")))
	if err := os.WriteFile(partial, []byte("half a pull"), 0o600); err != nil {
		t.Fatal(err)
	}
	f.removeTemps(context.Background(), ".") // at start: kept, and noted
	gone := d
	gone.Deleted = true
	gone.Version = d.Version.Update(peer.Short(), 2)
	announce(t, f, peer, gone)
	if retry := f.runPull(context.Background()); retry {
		f.mu.Lock()
		defer f.mu.Unlock()
		t.Fatalf("deleting a directory holding a partial file failed: %s", f.err)
	}
	if _, err := os.Stat(filepath.Join(dir, "d")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("d is still there: %v", err)
	}
	// A partial elsewhere, of a pull given up, goes once nothing is needed.
	other := filepath.Join(dir, filepath.FromSlash(fsys.PartialName("x.bin")))
	if err := os.WriteFile(other, []byte("abandoned"), 0o600); err != nil {
		t.Fatal(err)
	}
	f.notePartial(fsys.PartialName("x.bin"))
	f.runPull(context.Background())
	if _, err := os.Stat(other); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a partial file of a pull given up is kept with nothing needed: %v", err)
	}
}

// A file whose blocks a local file already holds is copied from it, with
// no peer to fetch from; the sources mapped are those of its blocks only.
func TestPullReusesLocalBlocks(t *testing.T) {
	peer := crypt.DeviceID{1}
	f := idleFolder(t)
	dir := f.config().Path
	data := randomData(t, 'u', 2*chunk.MinSize)
	putLocalFile(t, f, "old.bin", data)
	// Many unrelated local files: the pull maps only the hashes it needs.
	var others []index.Record
	for i := range 200 {
		others = append(others, index.Record{Name: fmt.Sprintf("o/%03d", i), Type: index.File, Size: 1, Blocks: []index.Block{{Size: 1, Hash: chunk.HashOf([]byte{byte(i)})}}, Version: index.Vector{{ID: crypt.DeviceID{9}.Short(), Value: 1}}})
	}
	if _, err := f.set.UpdateLocal(context.Background(), others); err != nil {
		t.Fatal(err)
	}
	moved := peerFile(peer, "new.bin", index.File, 2)
	moved.Size, moved.Blocks = int64(len(data)), minSizeBlocks(data)
	announce(t, f, peer, moved)
	if retry := f.runPull(context.Background()); retry {
		t.Fatal("the pull failed though a local file held every block")
	}
	if got, err := os.ReadFile(filepath.Join(dir, "new.bin")); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("new.bin: %d bytes, %v", len(got), err)
	}
	if got := f.reusedBytes.Load(); got != int64(len(data)) {
		t.Fatalf("reused %d bytes, want %d", got, len(data))
	}
	if got := f.localBlocks([]index.Record{moved}); len(got) != 2 || len(got[moved.Blocks[0].Hash]) != 2 {
		t.Fatalf("sources for new.bin's blocks: %v, want its two hashes, each in old.bin and new.bin", got)
	}
}

// A new version of a local file that joined a running pull, after the
// pull mapped its local sources, still copies the blocks its older version
// holds: an edit to a big file arriving mid-pull used to fetch the whole
// file.
func TestJoinedFileReusesItsOwnBlocks(t *testing.T) {
	peer := crypt.DeviceID{1}
	f := idleFolder(t)
	dir := f.config().Path
	data := randomData(t, 'j', 3*chunk.MinSize)
	putLocalFile(t, f, "big.bin", data)
	// The peer dropped the last block: every block left is held locally.
	cut := data[:2*chunk.MinSize]
	edited := peerFile(peer, "big.bin", index.File, 2)
	edited.Version = index.Vector{{ID: crypt.DeviceID{9}.Short(), Value: 1}, {ID: peer.Short(), Value: 2}}
	edited.Size, edited.Mode, edited.Blocks = int64(len(cut)), 0o644, minSizeBlocks(cut)
	// No sources mapped, as for a file that joined the pull; no peer is
	// connected to fetch from.
	mem := semaphore.NewWeighted(maxBytesInAir)
	d, err := f.pullOne(context.Background(), &edited, blockSources{}, mem)
	if err != nil {
		t.Fatalf("pulling an edit whose blocks the file's older version holds: %v", err)
	}
	defer f.fs.Remove(d.tmp)
	got, err := os.ReadFile(filepath.Join(dir, d.tmp))
	if err != nil || !bytes.Equal(got, cut) {
		t.Fatalf("prepared %d bytes, %v; want the edit's %d", len(got), err, len(cut))
	}
	if got := f.reusedBytes.Load(); got != int64(len(cut)) {
		t.Fatalf("reused %d bytes, want %d", got, len(cut))
	}
}

// A file or symlink pulled into a directory that does not exist yet gets
// it made; one under a file fails with the reason.
func TestPullMakesMissingParents(t *testing.T) {
	peer := crypt.DeviceID{1}
	f := idleFolder(t)
	dir := f.config().Path
	mem := semaphore.NewWeighted(maxBytesInAir)
	link := peerFile(peer, "a/b/link", index.Symlink, 1)
	link.Target = "../x"
	empty := peerFile(peer, "c/d/empty", index.File, 2)
	empty.Size, empty.Mode = 0, 0o644
	for _, r := range []index.Record{link, empty} {
		d, err := f.pullOne(context.Background(), &r, blockSources{}, mem)
		if err != nil {
			t.Fatalf("%s: %v", r.Name, err)
		}
		if path.Dir(d.tmp) != path.Dir(r.Name) {
			t.Fatalf("%s prepared as %s", r.Name, d.tmp)
		}
		if _, err := os.Lstat(filepath.Join(dir, d.tmp)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	under := peerFile(peer, "file/empty", index.File, 3)
	under.Size = 0
	if _, err := f.pullOne(context.Background(), &under, blockSources{}, mem); !errors.Is(err, syscall.ENOTDIR) {
		t.Fatalf("pulling under a file: %v, want ENOTDIR", err)
	}
}

// minSizeBlocks cuts data into blocks of chunk.MinSize, the last shorter.
func minSizeBlocks(data []byte) []index.Block {
	var bs []index.Block
	for off := 0; off < len(data); off += chunk.MinSize {
		b := data[off:min(off+chunk.MinSize, len(data))]
		bs = append(bs, index.Block{Offset: int64(off), Size: uint32(len(b)), Hash: chunk.HashOf(b)})
	}
	return bs
}

// randomData is n pseudo-random bytes from seed.
func randomData(t *testing.T, seed byte, n int) []byte {
	t.Helper()
	data := make([]byte, n)
	if _, err := rand.NewChaCha8([32]byte{seed}).Read(data); err != nil {
		t.Fatal(err)
	}
	return data
}

// putLocalFile writes data as f's file name and records it as scanned, in
// blocks of chunk.MinSize.
func putLocalFile(t *testing.T, f *folder, name string, data []byte) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(f.config().Path, name), data, 0o644); err != nil {
		t.Fatal(err)
	}
	r := index.Record{Name: name, Type: index.File, Size: int64(len(data)), Mode: 0o644, Blocks: minSizeBlocks(data), Version: index.Vector{{ID: crypt.DeviceID{9}.Short(), Value: 1}}}
	if _, err := f.set.UpdateLocal(context.Background(), []index.Record{r}); err != nil {
		t.Fatal(err)
	}
}
