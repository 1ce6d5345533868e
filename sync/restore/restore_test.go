package restore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"lockstep/chunk"
	"lockstep/crypt"
	"lockstep/sync/fsys"
	"lockstep/sync/index"
	"lockstep/sync/protocol"
)

func TestRecoverWrongPassword(t *testing.T) {
	s := newSealer(t)
	s.addTreeVersion(makeTree(t), originB, 1, vec(1, originB))
	tr := newTestReceiver(t, s)
	tr.start()
	opts := tr.options(t)
	opts.Password = []byte("correct horse battery stapler")
	_, err := Recover(recoverCtx(t), opts)
	if !errors.Is(err, ErrWrongPassword) || !errors.Is(err, crypt.ErrWrongPassword) {
		t.Fatalf("err = %v, want ErrWrongPassword", err)
	}
	if _, err := os.Lstat(opts.To); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("target after a wrong password: %v", err)
	}
	// Only the prefetch, made while the key was being opened, may have
	// asked for chunks: ciphertext, at most once each, and none kept.
	named := map[string]bool{}
	for _, sr := range s.log {
		for _, c := range sr.GetChunks() {
			named[string(c)] = true
		}
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.requests > len(named) {
		t.Errorf("%d chunks requested with a wrong password, more than the %d the log names", tr.requests, len(named))
	}
}

func TestRecoverRefusals(t *testing.T) {
	s := newSealer(t)
	s.addTreeVersion(makeTree(t), originB, 1, vec(1, originB))
	for _, tc := range []struct {
		name  string
		setup func(*testReceiver)
		want  error
	}{
		{"folder not offered", func(tr *testReceiver) { tr.shared = false }, ErrNotShared},
		{"device refused", func(tr *testReceiver) { tr.refuse = true }, ErrNotShared},
		{"no envelope", func(tr *testReceiver) { tr.envelope = nil }, ErrNoKey},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTestReceiver(t, s)
			tc.setup(tr)
			tr.start()
			opts := tr.options(t)
			_, err := Recover(recoverCtx(t), opts)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if _, err := os.Lstat(opts.To); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("target after a refusal: %v", err)
			}
		})
	}
}

func TestRecoverWrongReceiver(t *testing.T) {
	s := newSealer(t)
	tr := newTestReceiver(t, s)
	tr.start()
	opts := tr.options(t)
	opts.Receiver = newIdentity(t, "other").ID
	_, err := Recover(recoverCtx(t), opts)
	if err == nil || errors.Is(err, ErrNotShared) {
		t.Fatalf("err = %v, want a wrong-device error", err)
	}
	if tr.peerCC != nil {
		t.Error("talked to a receiver with another device ID")
	}
}

func TestRecoverTarget(t *testing.T) {
	s := newSealer(t)
	s.add(index.Record{Name: "a.txt", Mode: 0o644, ModTime: 1, Size: 1, Blocks: s.content([]byte("a")), Version: vec(1, originA)}, originA, 1)
	tr := newTestReceiver(t, s)
	tr.start()

	t.Run("not empty", func(t *testing.T) {
		opts := tr.options(t)
		if err := os.MkdirAll(opts.To, 0o755); err != nil {
			t.Fatal(err)
		}
		keep := filepath.Join(opts.To, "mine")
		if err := os.WriteFile(keep, []byte("mine"), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := Recover(recoverCtx(t), opts); !errors.Is(err, ErrTargetNotEmpty) {
			t.Fatalf("err = %v, want ErrTargetNotEmpty", err)
		}
		if b, err := os.ReadFile(keep); err != nil || string(b) != "mine" {
			t.Errorf("existing file: %q, %v", b, err)
		}
		if entries, _ := os.ReadDir(opts.To); len(entries) != 1 {
			t.Errorf("target holds %d entries", len(entries))
		}
	})
	t.Run("a file", func(t *testing.T) {
		opts := tr.options(t)
		if err := os.WriteFile(opts.To, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := Recover(recoverCtx(t), opts); !errors.Is(err, ErrTargetNotEmpty) {
			t.Fatalf("err = %v, want ErrTargetNotEmpty", err)
		}
	})
	t.Run("empty dir", func(t *testing.T) {
		opts := tr.options(t)
		if err := os.MkdirAll(opts.To, 0o755); err != nil {
			t.Fatal(err)
		}
		res, err := Recover(recoverCtx(t), opts)
		if err != nil || res.Files != 1 {
			t.Fatalf("Recover = %+v, %v", res, err)
		}
		if b, err := os.ReadFile(filepath.Join(opts.To, "a.txt")); err != nil || string(b) != "a" {
			t.Errorf("a.txt: %q, %v", b, err)
		}
	})
}

func TestRecoverDamagedChunk(t *testing.T) {
	src := makeTree(t)
	for _, tc := range []struct {
		name   string
		damage func(s *sealer, chunks map[crypt.ChunkID][]byte)
	}{
		{"flipped bit", func(s *sealer, chunks map[crypt.ChunkID][]byte) {
			id := s.ids["hello.txt"][0]
			body := bytes.Clone(chunks[id])
			body[len(body)/2] ^= 0x10
			chunks[id] = body
		}},
		{"swapped", func(s *sealer, chunks map[crypt.ChunkID][]byte) {
			chunks[s.ids["hello.txt"][0]] = chunks[s.ids["docs/readme.md"][0]]
		}},
		{"missing", func(s *sealer, chunks map[crypt.ChunkID][]byte) {
			delete(chunks, s.ids["hello.txt"][0])
		}},
		{"truncated", func(s *sealer, chunks map[crypt.ChunkID][]byte) {
			id := s.ids["hello.txt"][0]
			chunks[id] = chunks[id][:len(chunks[id])-1]
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSealer(t)
			s.addTreeVersion(src, originB, 1, vec(1, originB))
			tr := newTestReceiver(t, s)
			tr.chunks = maps(s.chunks)
			tc.damage(s, tr.chunks)
			tr.start()
			opts := tr.options(t)
			res, err := Recover(recoverCtx(t), opts)
			if !errors.Is(err, ErrDamaged) {
				t.Fatalf("err = %v, want ErrDamaged", err)
			}
			if !slices.Equal(res.Damaged, []string{"hello.txt"}) || res.Files != 6 || res.DamagedRecords != 0 {
				t.Errorf("result %+v", res)
			}
			compareTrees(t, src, opts.To, "hello.txt")
		})
	}
}

func TestRecoverDamagedRecord(t *testing.T) {
	src := makeTree(t)
	for _, tc := range []struct {
		name   string
		damage func(s *sealer, i int)
	}{
		{"flipped bit", func(s *sealer, i int) { s.log[i].Sealed[len(s.log[i].Sealed)/2] ^= 1 }},
		{"other counter", func(s *sealer, i int) { s.log[i].Counter++ }},
		{"other origin", func(s *sealer, i int) { s.log[i].Origin = originC[:] }},
		{"other file key", func(s *sealer, i int) {
			fk := s.keys.FileKey("docs/other.md")
			s.log[i].FileKey = fk[:]
		}},
		{"chunk list", func(s *sealer, i int) { s.log[i].Chunks = nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSealer(t)
			s.addTreeVersion(src, originB, 1, vec(1, originB))
			fk := s.keys.FileKey("docs/readme.md")
			i := slices.IndexFunc(s.log, func(sr *protocol.SealedRecord) bool { return bytes.Equal(sr.GetFileKey(), fk[:]) })
			tc.damage(s, i)
			tr := newTestReceiver(t, s)
			tr.start()
			opts := tr.options(t)
			res, err := Recover(recoverCtx(t), opts)
			if !errors.Is(err, ErrDamaged) {
				t.Fatalf("err = %v, want ErrDamaged", err)
			}
			if res.DamagedRecords != 1 || len(res.Damaged) != 0 || res.Files != 6 {
				t.Errorf("result %+v", res)
			}
			compareTrees(t, src, opts.To, "docs/readme.md")
		})
	}
}

func TestRecoverHostileNames(t *testing.T) {
	s := newSealer(t)
	content := s.content([]byte("planted\n"))
	hostile := []string{"../escape.txt", "sub/../../escape2.txt", "/abs.txt", ".lockstep/x", ".lockstep-tmp-x", "sub//x", "./x", "cafe\u0301.txt"}
	counter := uint64(1)
	for _, name := range hostile {
		s.add(index.Record{Name: name, Mode: 0o644, ModTime: 1, Size: 8, Blocks: content, Version: vec(1, originA)}, originA, counter)
		counter++
	}
	s.add(index.Record{Name: "ok.txt", Mode: 0o644, ModTime: 1, Size: 8, Blocks: content, Version: vec(1, originA)}, originA, counter)
	s.add(index.Record{Name: "out", Type: index.Symlink, Target: "../outside", ModTime: 1, Version: vec(1, originA)}, originA, counter+1)
	s.add(index.Record{Name: "out/planted.txt", Mode: 0o644, ModTime: 1, Size: 8, Blocks: content, Version: vec(1, originA)}, originA, counter+2)
	s.add(index.Record{Name: "out/deeper/planted.txt", Mode: 0o644, ModTime: 1, Size: 8, Blocks: content, Version: vec(1, originA)}, originA, counter+3)
	tr := newTestReceiver(t, s)
	tr.start()
	opts := tr.options(t)
	base := filepath.Dir(opts.To)
	outside := filepath.Join(base, "outside")
	if err := os.Mkdir(outside, 0o755); err != nil {
		t.Fatal(err)
	}

	res, err := Recover(recoverCtx(t), opts)
	if !errors.Is(err, ErrDamaged) {
		t.Fatalf("err = %v, want ErrDamaged", err)
	}
	if res.DamagedRecords != len(hostile) || !slices.Equal(res.Damaged, []string{"out/deeper/planted.txt", "out/planted.txt"}) || res.Files != 1 || res.Symlinks != 1 {
		t.Errorf("result %+v", res)
	}
	for dir, allowed := range map[string][]string{base: {"restored", "outside"}, outside: nil} {
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if !slices.Contains(allowed, e.Name()) {
				t.Errorf("%s appeared in %s", e.Name(), dir)
			}
		}
	}
	if _, err := os.Lstat(filepath.Join(filepath.Dir(base), "escape.txt")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("escape.txt outside the target: %v", err)
	}
	got, err := os.ReadDir(opts.To)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range got {
		if e.Name() != fsys.InternalDir {
			names = append(names, e.Name())
		}
	}
	if !slices.Equal(names, []string{"ok.txt", "out"}) {
		t.Errorf("target holds %v", names)
	}
}

func TestRecoverLogWindow(t *testing.T) {
	// Message counts around the receiver's window: the receiver sends the
	// next message only after acks.
	for _, n := range []int{0, 1, sendWindow - 1, sendWindow, sendWindow + 1, 3 * sendWindow} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			s := newSealer(t)
			for i := range n {
				data := []byte(fmt.Sprintf("file %d\n", i))
				s.add(index.Record{Name: fmt.Sprintf("f%02d", i), Mode: 0o644, ModTime: int64(i), Size: int64(len(data)), Blocks: s.content(data), Version: vec(1, originA)}, originA, uint64(i+1))
			}
			tr := newTestReceiver(t, s)
			tr.batch = 1
			tr.start()
			opts := tr.options(t)
			res, err := Recover(recoverCtx(t), opts)
			if err != nil || res.Files != n {
				t.Fatalf("Recover = %+v, %v", res, err)
			}
			entries, err := os.ReadDir(opts.To)
			entries = slices.DeleteFunc(entries, func(e os.DirEntry) bool { return e.Name() == fsys.InternalDir })
			if err != nil || len(entries) != n {
				t.Fatalf("target holds %d entries (%v), want %d", len(entries), err, n)
			}
			tr.mu.Lock()
			defer tr.mu.Unlock()
			if tr.acked != int64(n) || tr.maxUnacked > sendWindow || n > sendWindow && tr.maxUnacked < 1 {
				t.Errorf("acked %d of %d, at most %d unacknowledged", tr.acked, n, tr.maxUnacked)
			}
		})
	}
}

func TestRecoverStopsAtAnnouncedSequence(t *testing.T) {
	// The log grows after the receiver's ClusterConfig: records past the
	// announced sequence are not waited for, but used when they come in
	// the same message.
	const total = 6
	for _, tc := range []struct {
		announce int64
		batch    int
		want     int
	}{
		{total - 2, 1, total - 2},
		{total - 1, 1, total - 1},
		{total, 1, total},
		{total - 1, total, total},
	} {
		t.Run(fmt.Sprintf("%d-of-%d-by-%d", tc.announce, total, tc.batch), func(t *testing.T) {
			s := newSealer(t)
			for i := range total {
				s.add(index.Record{Name: fmt.Sprintf("d%d", i), Type: index.Dir, Mode: 0o755, ModTime: 1, Version: vec(1, originA)}, originA, uint64(i+1))
			}
			tr := newTestReceiver(t, s)
			tr.announce, tr.batch = tc.announce, tc.batch
			tr.start()
			opts := tr.options(t)
			res, err := Recover(recoverCtx(t), opts)
			if err != nil || res.Dirs != tc.want {
				t.Fatalf("Recover = %+v, %v; want %d dirs", res, err, tc.want)
			}
		})
	}
}

// TestRecoverCollectsWhileKeyOpens: the log is taken in while the folder
// key is fetched and opened, not after. This receiver sends the envelope
// only once the whole log is acknowledged.
func TestRecoverCollectsWhileKeyOpens(t *testing.T) {
	s := newSealer(t)
	for i := range 10 {
		s.add(index.Record{Name: fmt.Sprintf("d%d", i), Type: index.Dir, Mode: 0o755, ModTime: 1, Version: vec(1, originA)}, originA, uint64(i+1))
	}
	tr := newTestReceiver(t, s)
	tr.batch, tr.envelopeAfter = 2, 10
	tr.start()
	ctx, cancel := context.WithTimeout(recoverCtx(t), 20*time.Second)
	defer cancel()
	res, err := Recover(ctx, tr.options(t))
	if err != nil || res.Dirs != 10 {
		t.Fatalf("Recover = %+v, %v; want 10 dirs", res, err)
	}
}

// TestRecoverHoldsLittleBeforeTheKey: while the key is not open, at most
// sealedQueue messages of the log are taken in (and acknowledged); the
// rest waits at the receiver.
func TestRecoverHoldsLittleBeforeTheKey(t *testing.T) {
	s := newSealer(t)
	const n = sealedQueue + 20
	for i := range n {
		s.add(index.Record{Name: fmt.Sprintf("d%03d", i), Type: index.Dir, Mode: 0o755, ModTime: 1, Version: vec(1, originA)}, originA, uint64(i+1))
	}
	tr := newTestReceiver(t, s)
	tr.batch, tr.envelopeAfter = 1, sealedQueue
	tr.start()
	res, err := Recover(recoverCtx(t), tr.options(t))
	if err != nil || res.Dirs != n {
		t.Fatalf("Recover = %+v, %v; want %d dirs", res, err, n)
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.ackedAtEnvelope != sealedQueue {
		t.Errorf("%d records acknowledged before the key opened, want %d", tr.ackedAtEnvelope, sealedQueue)
	}
}

// TestRecoverEnvelopeNeverSent: a receiver that sends the log but never
// the envelope gets a clear error once the wait for it ends; one that
// stalls its log as well gets the stall error at once, not after the
// envelope's wait.
func TestRecoverEnvelopeNeverSent(t *testing.T) {
	s := newSealer(t)
	for i := range 6 {
		s.add(index.Record{Name: fmt.Sprintf("d%d", i), Type: index.Dir, Mode: 0o755, ModTime: 1, Version: vec(1, originA)}, originA, uint64(i+1))
	}
	for _, stall := range []bool{false, true} {
		tr := newTestReceiver(t, s)
		tr.envelopeNever = true
		if stall {
			tr.sendOnly = 3
		}
		tr.start()
		opts := tr.options(t)
		// The wait under test is short, the other long.
		opts.envelopeWait, opts.logStall = 300*time.Millisecond, time.Minute
		if stall {
			opts.envelopeWait, opts.logStall = time.Minute, 300*time.Millisecond
		}
		ctx, cancel := context.WithTimeout(recoverCtx(t), 20*time.Second)
		_, err := Recover(ctx, opts)
		want := "did not send the folder key envelope"
		if stall {
			want = "stopped sending its record log"
		}
		if err == nil || !strings.Contains(err.Error(), want) || ctx.Err() != nil {
			t.Errorf("stall %v: Recover = %v (context: %v), want %q", stall, err, ctx.Err(), want)
		}
		cancel()
		if _, serr := os.Stat(opts.To); !errors.Is(serr, fs.ErrNotExist) {
			t.Errorf("stall %v: target created: %v", stall, serr)
		}
	}
}

func TestRecoverChunksInFlight(t *testing.T) {
	s := newSealer(t)
	const files = 3 * MaxChunksInFlight
	for i := range files {
		data := []byte(fmt.Sprintf("small file %d\n", i))
		s.add(index.Record{Name: fmt.Sprintf("f%03d", i), Mode: 0o644, ModTime: 1, Size: int64(len(data)), Blocks: s.content(data), Version: vec(1, originA)}, originA, uint64(i+1))
	}
	tr := newTestReceiver(t, s)
	tr.delay = 20 * time.Millisecond
	tr.start()
	res, err := Recover(recoverCtx(t), tr.options(t))
	if err != nil || res.Files != files {
		t.Fatalf("Recover = %+v, %v", res, err)
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.maxActive > MaxChunksInFlight || tr.maxActive < 2 {
		t.Errorf("%d chunk requests in flight at most, want 2..%d", tr.maxActive, MaxChunksInFlight)
	}
}

// maps returns a copy of m.
func maps(m map[crypt.ChunkID][]byte) map[crypt.ChunkID][]byte {
	out := make(map[crypt.ChunkID][]byte, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func TestRecoverBlockSizeMismatch(t *testing.T) {
	// A record sealed by a key holder whose block claims more bytes than
	// its chunk holds: the chunk opens, but the file is not written.
	s := newSealer(t)
	blocks := s.content([]byte("abcde"))
	blocks[0].Size = 6
	s.add(index.Record{Name: "lie.txt", Mode: 0o644, ModTime: 1, Size: 6, Blocks: blocks, Version: vec(1, originA)}, originA, 1)
	s.add(index.Record{Name: "true.txt", Mode: 0o644, ModTime: 1, Size: 5, Blocks: s.content([]byte("abcde")), Version: vec(1, originA)}, originA, 2)
	tr := newTestReceiver(t, s)
	tr.start()
	opts := tr.options(t)
	res, err := Recover(recoverCtx(t), opts)
	if !errors.Is(err, ErrDamaged) || !slices.Equal(res.Damaged, []string{"lie.txt"}) || res.Files != 1 {
		t.Fatalf("Recover = %+v, %v", res, err)
	}
	if _, err := os.Lstat(filepath.Join(opts.To, "lie.txt")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("lie.txt: %v", err)
	}
}

// TestRecoverPrefetchesWhileKeyOpens: the chunks the records list are
// fetched while the key opens, a file's of several chunks too, and the
// writer uses them instead of asking again.
func TestRecoverPrefetchesWhileKeyOpens(t *testing.T) {
	s := newSealer(t)
	const small = 30
	for i := range small {
		data := fmt.Appendf(nil, "small file %d", i)
		s.add(index.Record{Name: fmt.Sprintf("s%02d", i), Mode: 0o644, ModTime: 1, Size: int64(len(data)), Blocks: s.content(data), Version: vec(1, originA)}, originA, uint64(i+1))
	}
	big := make([]byte, 3*chunk.MaxSize+5)
	for i := range big {
		big[i] = byte(i * 2654435761 >> 13)
	}
	s.add(index.Record{Name: "big", Mode: 0o644, ModTime: 1, Size: int64(len(big)), Blocks: s.content(big), Version: vec(1, originA)}, originA, small+1)
	tr := newTestReceiver(t, s)
	tr.envelopeAfter = small + 1
	tr.start()
	opts := tr.options(t)
	res, err := Recover(recoverCtx(t), opts)
	if err != nil || res.Files != small+1 {
		t.Fatalf("Recover = %+v, %v; want %d files", res, err, small+1)
	}
	for i := range small {
		if got, err := os.ReadFile(filepath.Join(opts.To, fmt.Sprintf("s%02d", i))); err != nil || string(got) != fmt.Sprintf("small file %d", i) {
			t.Fatalf("s%02d holds %q, %v", i, got, err)
		}
	}
	if got, err := os.ReadFile(filepath.Join(opts.To, "big")); err != nil || !bytes.Equal(got, big) {
		t.Fatalf("big differs: %v", err)
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	want := small + len(s.log[small].GetChunks())
	if tr.requestsAtEnvelope <= small {
		t.Errorf("%d chunks asked for before the key opened, want the small files' %d and some of big's", tr.requestsAtEnvelope, small)
	}
	if tr.requests != want {
		t.Errorf("%d chunk requests in all, want %d: prefetched chunks were fetched again", tr.requests, want)
	}
}

// A file past earlyWritebackSize is written back as it comes in; it must
// come out whole, and the writeback must end with it (goleak checks).
func TestRecoverLargeFile(t *testing.T) {
	s := newSealer(t)
	data := make([]byte, earlyWritebackSize+12345)
	if _, err := rand.NewChaCha8([32]byte{'l', 'a', 'r', 'g', 'e'}).Read(data); err != nil {
		t.Fatal(err)
	}
	s.add(index.Record{Name: "large.bin", Mode: 0o644, ModTime: 1, Size: int64(len(data)), Blocks: s.content(data), Version: vec(1, originA)}, originA, 1)
	tr := newTestReceiver(t, s)
	tr.start()
	opts := tr.options(t)
	res, err := Recover(recoverCtx(t), opts)
	if err != nil || res.Files != 1 || res.Bytes != int64(len(data)) {
		t.Fatalf("Recover = %+v, %v", res, err)
	}
	got, err := os.ReadFile(filepath.Join(opts.To, "large.bin"))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("large.bin: %d bytes, %v; want the %d written", len(got), err, len(data))
	}
}
