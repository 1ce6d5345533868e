package backup

import (
	"cmp"
	"fmt"
	"slices"
	"testing"

	"lockstep/crypt"
	"lockstep/sync/index"
	"lockstep/sync/sealed"
)

// TestUploadCheckpoint: a pass's checkpoint covers the folder's index at
// the pass's last sequence, deletions left out, and rides in the last
// record that is not a deletion; an index that moved on gives none.
func TestUploadCheckpoint(t *testing.T) {
	n := startForkNode(t)
	keys := testKeys(t, 1)
	u := n.b.newUpload(n.f, keys, crypt.DeviceID{4})
	set := n.f.Index()
	v := index.Vector{{ID: 9, Value: 1}}
	recs, err := set.UpdateLocal(t.Context(), []index.Record{
		{Name: "a", Type: index.Dir, Version: v},
		{Name: "a/b", Type: index.File, Version: v},
		{Name: "c", Type: index.File, Version: v, Deleted: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	last := recs[len(recs)-1].Sequence
	cp := u.checkpoint(keys, last)
	if cp == nil {
		t.Fatal("no checkpoint at the index's sequence")
	}
	want := sealed.NewDigest(keys)
	set.EachAnnounced(func(r *index.Record) {
		if !r.Deleted {
			want.Add(keys.FileKey(r.Name), uint64(r.Sequence))
		}
	})
	if cp.Counter != uint64(last) || cp.Files != 2 || !want.Matches(*cp) {
		t.Fatalf("checkpoint %+v at %d", cp, last)
	}
	if u.checkpoint(keys, last-1) != nil {
		t.Fatal("a checkpoint for a sequence the index has moved past")
	}

	// As a pass sends them: in sequence order, the deletion last.
	recs = set.LocalSince(0)
	slices.SortFunc(recs, func(a, b index.Record) int { return cmp.Compare(b2i(a.Deleted), b2i(b.Deleted)) })
	carrier := 1
	out, err := u.seal(recs, 0, cp)
	if err != nil {
		t.Fatal(err)
	}
	for i, sr := range out {
		o, err := sealed.OpenAll(keys, n.f.ID(), sr)
		if err != nil {
			t.Fatal(err)
		}
		if carries := o.Checkpoint != nil; carries != (i == carrier) {
			t.Errorf("record %d (%s, deleted %v) carries a checkpoint: %v", i, o.Record.Name, o.Record.Deleted, carries)
		}
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// BenchmarkUploadCheckpoint: the checkpoint of a 100,000-file folder,
// computed once per upload pass.
func BenchmarkUploadCheckpoint(b *testing.B) {
	n := startForkNode(b)
	keys := testKeys(b, 1)
	u := n.b.newUpload(n.f, keys, crypt.DeviceID{4})
	recs := make([]index.Record, 100_000)
	for i := range recs {
		recs[i] = index.Record{Name: fmt.Sprintf("dir-%03d/file-%06d.txt", i%1000, i), Type: index.File, Version: index.Vector{{ID: 9, Value: 1}}}
	}
	out, err := n.f.Index().UpdateLocal(b.Context(), recs)
	if err != nil {
		b.Fatal(err)
	}
	last := out[len(out)-1].Sequence
	b.ResetTimer()
	for b.Loop() {
		if u.checkpoint(keys, last) == nil {
			b.Fatal("no checkpoint")
		}
	}
}
