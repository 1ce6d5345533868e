package backup

import (
	"context"
	"errors"
	"strings"
	"testing"

	"lockstep/crypt"
	"lockstep/sync/protocol"
	"lockstep/sync/sealed"
)

func TestJudge(t *testing.T) {
	const s, c, log = 10, 5, 77
	cl := claim{logID: log, counter: c, sequence: s}
	for _, tc := range []struct {
		name string
		v    receiverView
		want verdict
	}{
		{"cursor s-1", receiverView{logID: log, cursor: s - 1}, claimPending},
		{"cursor s", receiverView{logID: log, cursor: s}, claimForked},
		{"cursor s+1", receiverView{logID: log, cursor: s + 1}, claimForked},
		{"seen c-1", receiverView{logID: log, cursor: s, seen: c - 1}, claimForked},
		{"seen c", receiverView{logID: log, cursor: s, seen: c}, claimHolds},
		{"seen c+1", receiverView{logID: log, cursor: s, seen: c + 1}, claimHolds},
		{"mark c-1", receiverView{logID: log, cursor: s, mark: c - 1}, claimForked},
		{"mark c", receiverView{logID: log, cursor: s, mark: c}, claimHolds},
		{"seen c before reading that far", receiverView{logID: log, cursor: s - 1, seen: c}, claimHolds},
		{"other log ID", receiverView{logID: log + 1, cursor: s + 100}, claimMoot},
		{"log never read", receiverView{cursor: s + 100}, claimMoot},
	} {
		if got := judge(cl, tc.v); got != tc.want {
			t.Errorf("%s: judge = %d, want %d", tc.name, got, tc.want)
		}
	}
}

func (n *forkNode) claim(counter uint64, seq int64, logID uint64) *protocol.ReceiverClaims {
	return &protocol.ReceiverClaims{Claims: []*protocol.ReceiverClaim{{
		Folder: "f", Receiver: n.receiver[:], LogId: logID, Origin: n.trusted[:], Counter: counter, Sequence: seq,
	}}}
}

func TestReceiverClaimsReportFork(t *testing.T) {
	ctx := context.Background()
	n := startForkNode(t)
	const logID = 77
	if err := n.db.SetPeerIndexID(ctx, "f", n.receiver.String(), logID); err != nil {
		t.Fatal(err)
	}
	n.setCursor(t, 9)
	if err := n.b.raiseOrigins(ctx, "f", n.receiver, map[crypt.DeviceID]uint64{n.trusted: 4}, map[crypt.DeviceID]uint64{n.trusted: 3}); err != nil {
		t.Fatal(err)
	}
	peer := n.peer(t, n.trusted)

	// Not read that far yet (cursor s-1): kept, nothing reported.
	if err := n.b.ReceiverClaims(peer, n.claim(5, 10, logID)); err != nil {
		t.Fatal(err)
	}
	if e := n.receiverErr(t); e != "" {
		t.Fatalf("pending claim reported: %s", e)
	}
	// Reading to s without the record: the kept claim is now a fork.
	n.setCursor(t, 10)
	n.b.checkClaims(ctx, n.f, n.receiver)
	e := n.receiverErr(t)
	if !strings.Contains(e, "forked its log") || !strings.Contains(e, "record 5 at log sequence 10") {
		t.Fatalf("fork not reported: %q", e)
	}
	// Sticky: a reconnect clearing other errors leaves it.
	n.b.share("f").setReceiverError(n.receiver, nil)
	if e := n.receiverErr(t); !strings.Contains(e, "forked") {
		t.Fatalf("fork report cleared by a reconnect: %q", e)
	}
	// Lower counters never lower what is stored.
	if err := n.b.raiseOrigins(ctx, "f", n.receiver, map[crypt.DeviceID]uint64{n.trusted: 1}, map[crypt.DeviceID]uint64{n.trusted: 1}); err != nil {
		t.Fatal(err)
	}
	if m := n.b.originMarks(ctx, "f", n.receiver)[n.trusted]; m.Seen != 4 || m.Mark != 3 {
		t.Fatalf("origin marks went down: %+v", m)
	}
	// A newer pending claim does not hide the fork.
	if err := n.b.ReceiverClaims(peer, n.claim(8, 20, logID)); err != nil {
		t.Fatal(err)
	}
	if e := n.receiverErr(t); !strings.Contains(e, "record 5 at") {
		t.Fatalf("fork report lost to a newer claim: %q", e)
	}
	// The receiver's high-water mark reaching c (it pruned the record)
	// settles it.
	if err := n.b.raiseOrigins(ctx, "f", n.receiver, nil, map[crypt.DeviceID]uint64{n.trusted: 5}); err != nil {
		t.Fatal(err)
	}
	n.b.checkClaims(ctx, n.f, n.receiver)
	if e := n.receiverErr(t); e != "" {
		t.Fatalf("fork still reported once the claim holds: %q", e)
	}
	// The newer claim (8 at 20) was kept, and fires when read past.
	n.setCursor(t, 20)
	n.b.checkClaims(ctx, n.f, n.receiver)
	if e := n.receiverErr(t); !strings.Contains(e, "record 8 at log sequence 20") {
		t.Fatalf("kept claim not checked again: %q", e)
	}
	// Seeing the record in the log settles it.
	if err := n.b.raiseOrigins(ctx, "f", n.receiver, map[crypt.DeviceID]uint64{n.trusted: 8}, nil); err != nil {
		t.Fatal(err)
	}
	n.b.checkClaims(ctx, n.f, n.receiver)
	if e := n.receiverErr(t); e != "" {
		t.Fatalf("fork still reported once the record was seen: %q", e)
	}
}

func TestReceiverClaimsIgnoredOrRefused(t *testing.T) {
	ctx := context.Background()
	n := startForkNode(t)
	const logID = 77
	if err := n.db.SetPeerIndexID(ctx, "f", n.receiver.String(), logID); err != nil {
		t.Fatal(err)
	}
	n.setCursor(t, 100)
	peer := n.peer(t, n.trusted)
	// Another log ID: not this device's business.
	if err := n.b.ReceiverClaims(peer, n.claim(5, 10, logID+1)); err != nil {
		t.Fatal(err)
	}
	// Another origin than the sender: ignored.
	other := n.claim(5, 10, logID)
	other.Claims[0].Origin = make([]byte, 32)
	if err := n.b.ReceiverClaims(peer, other); err != nil {
		t.Fatal(err)
	}
	// A folder not shared with the sender, or a receiver not used here.
	unknown := n.claim(5, 10, logID)
	unknown.Claims[0].Folder = "nope"
	notReceiver := n.claim(5, 10, logID)
	notReceiver.Claims[0].Receiver = n.trusted[:]
	for _, rc := range []*protocol.ReceiverClaims{unknown, notReceiver} {
		if err := n.b.ReceiverClaims(peer, rc); err != nil {
			t.Fatal(err)
		}
	}
	if e := n.receiverErr(t); e != "" {
		t.Fatalf("an ignorable claim was reported: %q", e)
	}
	// From an untrusted device: refused (the connection ends).
	fromReceiver := n.claim(5, 10, logID)
	fromReceiver.Claims[0].Origin = n.receiver[:]
	if err := n.b.ReceiverClaims(n.peer(t, n.receiver), fromReceiver); !errors.Is(err, ErrUntrustedClaims) {
		t.Fatalf("claims from a receiver: %v, want ErrUntrustedClaims", err)
	}
	// The control: the same claim with the right log ID is reported.
	if err := n.b.ReceiverClaims(peer, n.claim(5, 10, logID)); err != nil {
		t.Fatal(err)
	}
	if e := n.receiverErr(t); !strings.Contains(e, "forked") {
		t.Fatalf("fork not reported: %q", e)
	}
}

func TestClaimsFor(t *testing.T) {
	ctx := context.Background()
	n := startForkNode(t)
	if got := n.b.claimsFor(ctx, n.trusted); len(got) != 0 {
		t.Fatalf("claims before anything was served back: %v", got)
	}
	if err := n.db.SetPeerIndexID(ctx, "f", n.receiver.String(), 77); err != nil {
		t.Fatal(err)
	}
	if err := n.db.SetReceiverHeld(ctx, "f", n.receiver.String(), 4, 12); err != nil {
		t.Fatal(err)
	}
	got := n.b.claimsFor(ctx, n.trusted)
	if len(got) != 1 {
		t.Fatalf("claims = %v", got)
	}
	c := got[0]
	if c.GetFolder() != "f" || crypt.DeviceID(c.GetReceiver()) != n.receiver || c.GetLogId() != 77 ||
		crypt.DeviceID(c.GetOrigin()) != n.id || c.GetCounter() != 4 || c.GetSequence() != 12 {
		t.Fatalf("claim = %v", c)
	}
	if got := n.b.claimsFor(ctx, n.receiver); len(got) != 0 {
		t.Fatalf("claims for a receiver: %v", got)
	}
	// A new log forgets where the record was: no claim until it is served
	// back again.
	if err := n.b.forgetReceiverLog(ctx, "f", n.receiver); err != nil {
		t.Fatal(err)
	}
	if got := n.b.claimsFor(ctx, n.trusted); len(got) != 0 {
		t.Fatalf("claims after the log was forgotten: %v", got)
	}
}

// TestSealedIndexRecordsWhereHeld: reading a receiver's log records, per
// origin, the highest counter seen, and where this device's highest record
// came, raised only.
func TestSealedIndexRecordsWhereHeld(t *testing.T) {
	ctx := context.Background()
	n := startForkNode(t)
	keys := testKeys(t, 1)
	if err := n.db.SetFolderKey(ctx, "f", [32]byte{1}); err != nil {
		t.Fatal(err)
	}
	rec := func(name string, counter uint64, seq int64) *protocol.SealedRecord {
		r := sampleRecord()
		r.Name, r.Sequence = name, int64(counter)
		sr, err := sealed.Seal(keys, "f", crypt.DeviceID{9}, &r, 7) // origin {9}: this device
		if err != nil {
			t.Fatal(err)
		}
		sr.Sequence = seq
		return sr
	}
	idx := &protocol.SealedIndex{Folder: "f", Records: []*protocol.SealedRecord{rec("a", 3, 7), rec("b", 5, 8), rec("c", 4, 9)}}
	if err := n.b.sealedIndex(ctx, n.f, n.receiver, idx); err != nil {
		t.Fatal(err)
	}
	check := func(held, at, cursor int64, seen uint64) {
		t.Helper()
		v := n.b.view(ctx, "f", n.receiver)
		if v.Held != held {
			t.Errorf("held = %d, want %d", v.Held, held)
		}
		if v.HeldAt != at {
			t.Errorf("held at = %d, want %d", v.HeldAt, at)
		}
		if v.Cursor != cursor {
			t.Errorf("cursor = %d, want %d", v.Cursor, cursor)
		}
		if got := n.b.originMarks(ctx, "f", n.receiver)[n.id].Seen; got != seen {
			t.Errorf("seen = %d, want %d", got, seen)
		}
	}
	check(5, 8, 9, 5)
	// Lower counters later in the log change nothing but the cursor.
	if err := n.b.sealedIndex(ctx, n.f, n.receiver, &protocol.SealedIndex{Folder: "f", Records: []*protocol.SealedRecord{rec("d", 2, 10)}}); err != nil {
		t.Fatal(err)
	}
	check(5, 8, 10, 5)
	if err := n.b.sealedIndex(ctx, n.f, n.receiver, &protocol.SealedIndex{Folder: "f", Records: []*protocol.SealedRecord{rec("e", 6, 11)}}); err != nil {
		t.Fatal(err)
	}
	check(6, 11, 11, 6)
}
