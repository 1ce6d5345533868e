package restore

import (
	"io"
	"log/slog"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	"lockstep/sync/fsys"
	"lockstep/sync/index"
	"lockstep/sync/protocol"
)

// FuzzCollect feeds arbitrary SealedRecords (the receiver's untrusted
// bytes) to the collector. It must not panic, must count every record as
// used or damaged, and may plan only valid names whose blocks tile the
// file.
func FuzzCollect(f *testing.F) {
	s := newSealer(f)
	s.add(index.Record{Name: "a.txt", Mode: 0o644, ModTime: 1, Size: 3, Blocks: s.content([]byte("abc")), Version: vec(1, originA)}, originA, 1)
	s.add(index.Record{Name: "d", Type: index.Dir, Mode: 0o755, ModTime: 1, Version: vec(1, originA)}, originA, 2)
	s.add(index.Record{Name: "d/l", Type: index.Symlink, Target: "../a.txt", ModTime: 1, Version: vec(1, originA)}, originA, 3)
	s.add(index.Record{Name: "../x", Mode: 0o644, ModTime: 1, Version: vec(1, originA)}, originA, 4)
	for _, sr := range s.log {
		b, err := proto.Marshal(sr)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	f.Fuzz(func(t *testing.T, data []byte) {
		var sr protocol.SealedRecord
		if proto.Unmarshal(data, &sr) != nil {
			return
		}
		c := newCollector(s.keys, testFolder, log)
		c.add(&sr)
		if len(c.best)+c.bad != 1 {
			t.Fatalf("%d kept and %d damaged of one record", len(c.best), c.bad)
		}
		p := c.plan()
		for _, r := range slices.Concat(p.dirs, p.files, p.symlinks) {
			if err := fsys.ValidName(r.Name); err != nil {
				t.Fatalf("planned %v", err)
			}
			var off int64
			for _, b := range r.Blocks {
				if b.Offset != off || b.Size == 0 {
					t.Fatalf("%q: blocks do not tile", r.Name)
				}
				off += int64(b.Size)
			}
			if off != r.Size && r.Type == index.File {
				t.Fatalf("%q: blocks cover %d of %d", r.Name, off, r.Size)
			}
		}
	})
}
