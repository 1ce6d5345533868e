package receiver

import (
	"bytes"
	"context"
	"reflect"
	"slices"
	"testing"
	"time"

	"lockstep/storage/blob/mem"
	"lockstep/storage/db"
	"lockstep/sync/protocol"
)

// copyOf is a record of one file (the same file key for every device)
// by origin, at, with the deletion flag and chunk list of content.
func copyOf(origin byte, at time.Time, deleted bool, content byte) db.SealedRecord {
	r := db.SealedRecord{Origin: bytes.Repeat([]byte{origin}, 32), StoredAt: at, Deleted: deleted}
	if !deleted {
		r.Chunks = bytes.Repeat([]byte{content}, 32)
	}
	return r
}

// TestPolicyKeepsCopiesOnce: the copies two devices upload of one version
// count once for retention, and stay or go together.
func TestPolicyKeepsCopiesOnce(t *testing.T) {
	at := func(minutes int) time.Time { return base.Add(-time.Duration(minutes) * time.Minute) }
	for _, c := range []struct {
		name string
		p    Policy
		recs []db.SealedRecord // newest first
		want []bool
	}{
		{"two devices, three versions, keep last 2", Policy{KeepLast: 2}, []db.SealedRecord{
			copyOf('b', at(0), false, 3), copyOf('a', at(1), false, 3),
			copyOf('b', at(60), false, 2), copyOf('a', at(61), false, 2),
			copyOf('b', at(120), false, 1), copyOf('a', at(121), false, 1),
		}, []bool{true, true, true, true, false, false}},
		{"one device's copies uploaded late", Policy{KeepLast: 2}, []db.SealedRecord{
			copyOf('b', at(0), false, 3), copyOf('b', at(1), false, 2), copyOf('b', at(2), false, 1),
			copyOf('a', at(60), false, 3), copyOf('a', at(61), false, 2), copyOf('a', at(62), false, 1),
		}, []bool{true, true, false, false, false, false}},
		{"a change of metadata only is a version of its own", Policy{KeepLast: 2}, []db.SealedRecord{
			copyOf('a', at(0), false, 1), copyOf('a', at(1), false, 1), copyOf('a', at(2), false, 1),
		}, []bool{true, true, false}},
		{"a content brought back is a version of its own", Policy{KeepLast: 2}, []db.SealedRecord{
			copyOf('a', at(0), false, 1), copyOf('b', at(1), false, 1),
			copyOf('a', at(2), false, 2), copyOf('b', at(3), false, 2),
			copyOf('a', at(4), false, 1), copyOf('b', at(5), false, 1),
		}, []bool{true, true, true, true, false, false}},
		{"a deletion is not the copy of a version", Policy{KeepLast: 1}, []db.SealedRecord{
			copyOf('a', at(0), true, 0), copyOf('b', at(1), true, 0), copyOf('a', at(2), false, 1),
		}, []bool{true, true, false}},
		{"hourly buckets count versions", Policy{KeepHourly: 2}, []db.SealedRecord{
			copyOf('b', at(0), false, 3), copyOf('a', at(1), false, 3),
			copyOf('b', at(60), false, 2), copyOf('a', at(61), false, 2),
			copyOf('b', at(120), false, 1), copyOf('a', at(121), false, 1),
		}, []bool{true, true, true, true, false, false}},
	} {
		if got := c.p.keeps(c.recs, base); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: keeps %v, want %v", c.name, got, c.want)
		}
	}
	// An expired deletion uploaded by both devices takes the file.
	old := base.AddDate(0, 0, -10)
	recs := []db.SealedRecord{copyOf('b', old, true, 0), copyOf('a', old.Add(-time.Minute), true, 0), copyOf('a', old.Add(-time.Hour), false, 1)}
	if got := (Policy{KeepDeletedDays: 7, KeepLast: 3}).keeps(recs, base); slices.Contains(got, true) {
		t.Errorf("expired deletion of two devices: keeps %v", got)
	}
}

// TestPruneTwoDevices: two devices each upload the same three versions of
// a file; keep-last 2 keeps both copies of the two newest versions and
// every chunk they reference, and drops both copies of the oldest.
func TestPruneTwoDevices(t *testing.T) {
	ctx := context.Background()
	p, q := newTrusted(), newTrusted()
	n := newNode(t, mem.New(), p.id, q.id)
	now := time.Now().Add(2 * time.Hour)
	old := now.Add(-48 * time.Hour)
	shared := n.putChunk(t, 10)
	own := [][]byte{n.putChunk(t, 20), n.putChunk(t, 30), n.putChunk(t, 40)}
	fileKey := bytes.Repeat([]byte{7}, 32)
	var recs []*protocol.SealedRecord
	for i, c := range own {
		at := old.Add(time.Duration(i) * time.Hour)
		for j, d := range []*trusted{p, q} {
			w := stamped(d, uint64(i+1), 0, at.Add(time.Duration(j)*time.Minute), false, shared, c)
			w.FileKey = fileKey
			recs = append(recs, w)
		}
	}
	n.commitRecs(t, recs...)
	if err := n.r.SetRetention(ctx, folderID, Policy{KeepLast: 2}); err != nil {
		t.Fatal(err)
	}
	res, err := n.r.Prune(ctx, folderID, PruneOptions{Grace: time.Hour, Now: now})
	if want := (PruneResult{Records: 2, Kept: 4, Chunks: 1, Bytes: 20}); err != nil || res != want {
		t.Fatalf("Prune = %+v, %v; want %+v", res, err, want)
	}
	type copyKey struct {
		origin  byte
		counter uint64
	}
	var left []copyKey
	for _, r := range n.records(t) {
		left = append(left, copyKey{r.Origin[0], r.Counter})
	}
	if want := []copyKey{{p.id[0], 2}, {q.id[0], 2}, {p.id[0], 3}, {q.id[0], 3}}; !reflect.DeepEqual(left, want) {
		t.Fatalf("records left %v, want both copies of versions 2 and 3: %v", left, want)
	}
	// What a recovery of either device's copies needs is all there.
	for _, id := range [][]byte{shared, own[1], own[2]} {
		if _, err := n.storedChunk(ctx, id); err != nil {
			t.Errorf("chunk %x of a kept version: %v", id[:4], err)
		}
	}
}
