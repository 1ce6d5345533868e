package restore

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"testing"

	"lockstep/chunk"
	"lockstep/crypt"
	"lockstep/sync/fsys"
	"lockstep/sync/index"
)

// benchFolder seals files of size bytes each, random content.
func benchFolder(b *testing.B, files, size int) *sealer {
	s := newSealer(b)
	for i := range files {
		data := make([]byte, size)
		if _, err := rand.Read(data); err != nil {
			b.Fatal(err)
		}
		s.add(index.Record{Name: fmt.Sprintf("f%03d", i), Mode: 0o644, ModTime: 1, Size: int64(size), Blocks: s.content(data), Version: vec(1, originA)}, originA, uint64(i+1))
	}
	return s
}

// memSource opens sealed chunks held in memory: the writer's work without
// the network.
type memSource struct {
	keys   *crypt.Keys
	chunks map[crypt.ChunkID][]byte
}

func (m *memSource) Chunk(_ context.Context, b index.Block, use func([]byte) error) error {
	id := m.keys.ChunkID(b.Hash)
	plain, err := m.keys.OpenChunk(id, m.chunks[id])
	if err != nil || chunk.HashOf(plain) != b.Hash {
		return fmt.Errorf("%w: %v", ErrDamaged, err)
	}
	return use(plain)
}

// BenchmarkWrite measures opening, checking and writing chunks into a
// folder (one barrier for all files), without the network.
func BenchmarkWrite(b *testing.B) {
	const files, size = 16, 4 << 20
	s := benchFolder(b, files, size)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	c := newCollector(s.keys, testFolder, log)
	for _, sr := range s.log {
		c.add(sr)
	}
	p := c.plan()
	b.SetBytes(files * size)
	for b.Loop() {
		b.StopTimer()
		dir := b.TempDir()
		root, err := fsys.Open(dir)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		w := newWriter(root, &memSource{keys: s.keys, chunks: s.chunks}, log, nil)
		if res, err := w.write(context.Background(), p); err != nil || res.Files != files {
			b.Fatalf("write = %+v, %v", res, err)
		}
		root.Close()
	}
}

// BenchmarkRecover measures a whole recovery over TLS on loopback,
// including the envelope's scrypt.
func BenchmarkRecover(b *testing.B) {
	const files, size = 16, 4 << 20
	s := benchFolder(b, files, size)
	tr := newTestReceiver(b, s)
	tr.start()
	opts := tr.options(b)
	b.SetBytes(files * size)
	for b.Loop() {
		opts.To = filepath.Join(b.TempDir(), "restored")
		if res, err := Recover(context.Background(), opts); err != nil || res.Files != files {
			b.Fatalf("Recover = %+v, %v", res, err)
		}
	}
}

// BenchmarkRenameAll measures putting 10,000 written files, 100 to a
// directory, under their names, with 1 and with renameWorkers at once.
func BenchmarkRenameAll(b *testing.B) {
	const dirs, perDir = 100, 100
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, workers := range []int{1, renameWorkers} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				root, err := fsys.Open(b.TempDir())
				if err != nil {
					b.Fatal(err)
				}
				w := newWriter(root, nil, log, nil)
				for d := range dirs {
					if err := root.MkdirAll(fmt.Sprintf("d%03d", d), 0o755); err != nil {
						b.Fatal(err)
					}
					for i := range perDir {
						name := fmt.Sprintf("d%03d/f%03d", d, i)
						f, tmp, err := root.CreateTemp(name)
						if err != nil {
							b.Fatal(err)
						}
						f.Close()
						w.renames = append(w.renames, rename{tmp: tmp, name: name})
					}
				}
				b.StartTimer()
				if err := w.renameAll(workers); err != nil {
					b.Fatal(err)
				}
				root.Close()
				b.StartTimer()
			}
		})
	}
}
