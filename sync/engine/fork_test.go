package engine

import (
	"context"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"testing"

	"lockstep/crypt"
	"lockstep/storage/db"
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

// forkNode is an engine with folder "f" shared with a trusted device and
// a receiver.
type forkNode struct {
	e                 *Engine
	f                 *folder
	trusted, receiver crypt.DeviceID
}

func startForkNode(t *testing.T) *forkNode {
	t.Helper()
	n := &forkNode{trusted: crypt.DeviceID{1}, receiver: crypt.DeviceID{2}}
	n.e = startEngine(t, t.TempDir(), db.Device{ID: n.trusted.String()}, db.Device{ID: n.receiver.String(), Untrusted: true})
	n.f = n.e.folder("f")
	return n
}

func (n *forkNode) set(t *testing.T, key string, v int64) {
	t.Helper()
	if err := n.e.db.SetSetting(context.Background(), key, strconv.FormatInt(v, 10)); err != nil {
		t.Fatal(err)
	}
}

// receiverErr is the status error of the receiver.
func (n *forkNode) receiverErr(t *testing.T) string {
	t.Helper()
	st, ok := n.e.FolderStatus("f")
	if !ok {
		t.Fatal("no folder status")
	}
	for _, p := range st.Peers {
		if p.Device == n.receiver {
			return p.Error
		}
	}
	t.Fatal("receiver not in status")
	return ""
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
	if err := n.e.setPeerIndexID(ctx, "f", n.receiver, logID); err != nil {
		t.Fatal(err)
	}
	n.set(t, logCursorSetting("f", n.receiver), 9)
	if err := n.f.raiseOrigins(ctx, n.receiver, map[crypt.DeviceID]uint64{n.trusted: 4}, map[crypt.DeviceID]uint64{n.trusted: 3}); err != nil {
		t.Fatal(err)
	}
	peer := protocol.DeviceID(n.trusted)

	// Not read that far yet (cursor s-1): kept, nothing reported.
	if err := n.e.ReceiverClaims(peer, n.claim(5, 10, logID)); err != nil {
		t.Fatal(err)
	}
	if e := n.receiverErr(t); e != "" {
		t.Fatalf("pending claim reported: %s", e)
	}
	// Reading to s without the record: the kept claim is now a fork.
	n.set(t, logCursorSetting("f", n.receiver), 10)
	n.f.checkClaims(ctx, n.receiver)
	e := n.receiverErr(t)
	if !strings.Contains(e, "forked its log") || !strings.Contains(e, "record 5 at log sequence 10") {
		t.Fatalf("fork not reported: %q", e)
	}
	// Sticky: a reconnect clearing other errors leaves it.
	n.f.setReceiverError(n.receiver, nil)
	if e := n.receiverErr(t); !strings.Contains(e, "forked") {
		t.Fatalf("fork report cleared by a reconnect: %q", e)
	}
	// Lower counters never lower what is stored.
	if err := n.f.raiseOrigins(ctx, n.receiver, map[crypt.DeviceID]uint64{n.trusted: 1}, map[crypt.DeviceID]uint64{n.trusted: 1}); err != nil {
		t.Fatal(err)
	}
	if m := n.e.originMarks(ctx, "f", n.receiver)[n.trusted]; m.Seen != 4 || m.Mark != 3 {
		t.Fatalf("origin marks went down: %+v", m)
	}
	// A newer pending claim does not hide the fork.
	if err := n.e.ReceiverClaims(peer, n.claim(8, 20, logID)); err != nil {
		t.Fatal(err)
	}
	if e := n.receiverErr(t); !strings.Contains(e, "record 5 at") {
		t.Fatalf("fork report lost to a newer claim: %q", e)
	}
	// The receiver's high-water mark reaching c (it pruned the record)
	// settles it.
	if err := n.f.raiseOrigins(ctx, n.receiver, nil, map[crypt.DeviceID]uint64{n.trusted: 5}); err != nil {
		t.Fatal(err)
	}
	n.f.checkClaims(ctx, n.receiver)
	if e := n.receiverErr(t); e != "" {
		t.Fatalf("fork still reported once the claim holds: %q", e)
	}
	// The newer claim (8 at 20) was kept, and fires when read past.
	n.set(t, logCursorSetting("f", n.receiver), 20)
	n.f.checkClaims(ctx, n.receiver)
	if e := n.receiverErr(t); !strings.Contains(e, "record 8 at log sequence 20") {
		t.Fatalf("kept claim not checked again: %q", e)
	}
	// Seeing the record in the log settles it.
	if err := n.f.raiseOrigins(ctx, n.receiver, map[crypt.DeviceID]uint64{n.trusted: 8}, nil); err != nil {
		t.Fatal(err)
	}
	n.f.checkClaims(ctx, n.receiver)
	if e := n.receiverErr(t); e != "" {
		t.Fatalf("fork still reported once the record was seen: %q", e)
	}
}

func TestReceiverClaimsIgnoredOrRefused(t *testing.T) {
	ctx := context.Background()
	n := startForkNode(t)
	const logID = 77
	if err := n.e.setPeerIndexID(ctx, "f", n.receiver, logID); err != nil {
		t.Fatal(err)
	}
	n.set(t, logCursorSetting("f", n.receiver), 100)
	peer := protocol.DeviceID(n.trusted)
	// Another log ID: not this device's business.
	if err := n.e.ReceiverClaims(peer, n.claim(5, 10, logID+1)); err != nil {
		t.Fatal(err)
	}
	// Another origin than the sender: ignored.
	other := n.claim(5, 10, logID)
	other.Claims[0].Origin = make([]byte, 32)
	if err := n.e.ReceiverClaims(peer, other); err != nil {
		t.Fatal(err)
	}
	// A folder not shared with the sender, or a receiver not used here.
	unknown := n.claim(5, 10, logID)
	unknown.Claims[0].Folder = "nope"
	notReceiver := n.claim(5, 10, logID)
	notReceiver.Claims[0].Receiver = n.trusted[:]
	for _, rc := range []*protocol.ReceiverClaims{unknown, notReceiver} {
		if err := n.e.ReceiverClaims(peer, rc); err != nil {
			t.Fatal(err)
		}
	}
	if e := n.receiverErr(t); e != "" {
		t.Fatalf("an ignorable claim was reported: %q", e)
	}
	// From an untrusted device: refused (the connection ends).
	fromReceiver := n.claim(5, 10, logID)
	fromReceiver.Claims[0].Origin = n.receiver[:]
	if err := n.e.ReceiverClaims(protocol.DeviceID(n.receiver), fromReceiver); !errors.Is(err, ErrUntrustedClaims) {
		t.Fatalf("claims from a receiver: %v, want ErrUntrustedClaims", err)
	}
	// The control: the same claim with the right log ID is reported.
	if err := n.e.ReceiverClaims(peer, n.claim(5, 10, logID)); err != nil {
		t.Fatal(err)
	}
	if e := n.receiverErr(t); !strings.Contains(e, "forked") {
		t.Fatalf("fork not reported: %q", e)
	}
}

func TestClaimsFor(t *testing.T) {
	ctx := context.Background()
	n := startForkNode(t)
	if got := n.e.claimsFor(ctx, n.trusted); len(got) != 0 {
		t.Fatalf("claims before anything was served back: %v", got)
	}
	if err := n.e.setPeerIndexID(ctx, "f", n.receiver, 77); err != nil {
		t.Fatal(err)
	}
	n.set(t, heldAtSetting("f", n.receiver), 12)
	n.set(t, heldSetting("f", n.receiver), 4)
	got := n.e.claimsFor(ctx, n.trusted)
	if len(got) != 1 {
		t.Fatalf("claims = %v", got)
	}
	c := got[0]
	if c.GetFolder() != "f" || crypt.DeviceID(c.GetReceiver()) != n.receiver || c.GetLogId() != 77 ||
		crypt.DeviceID(c.GetOrigin()) != n.e.id || c.GetCounter() != 4 || c.GetSequence() != 12 {
		t.Fatalf("claim = %v", c)
	}
	if got := n.e.claimsFor(ctx, n.receiver); len(got) != 0 {
		t.Fatalf("claims for a receiver: %v", got)
	}
	// A new log forgets where the record was: no claim until it is served
	// back again.
	if err := n.f.forgetReceiverLog(ctx, n.receiver); err != nil {
		t.Fatal(err)
	}
	if got := n.e.claimsFor(ctx, n.trusted); len(got) != 0 {
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
	if err := n.e.db.SetSetting(ctx, folderKeySetting("f"), hex.EncodeToString(append([]byte{1}, make([]byte, 31)...))); err != nil {
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
	if err := n.f.sealedIndexFrom(ctx, n.receiver, idx); err != nil {
		t.Fatal(err)
	}
	check := func(held, at, cursor int64, seen uint64) {
		t.Helper()
		if got := n.e.settingInt(ctx, heldSetting("f", n.receiver)); got != held {
			t.Errorf("held = %d, want %d", got, held)
		}
		if got := n.e.settingInt(ctx, heldAtSetting("f", n.receiver)); got != at {
			t.Errorf("held at = %d, want %d", got, at)
		}
		if got := n.e.settingInt(ctx, logCursorSetting("f", n.receiver)); got != cursor {
			t.Errorf("cursor = %d, want %d", got, cursor)
		}
		if got := n.e.originMarks(ctx, "f", n.receiver)[n.e.id].Seen; got != seen {
			t.Errorf("seen = %d, want %d", got, seen)
		}
	}
	check(5, 8, 9, 5)
	// Lower counters later in the log change nothing but the cursor.
	if err := n.f.sealedIndexFrom(ctx, n.receiver, &protocol.SealedIndex{Folder: "f", Records: []*protocol.SealedRecord{rec("d", 2, 10)}}); err != nil {
		t.Fatal(err)
	}
	check(5, 8, 10, 5)
	if err := n.f.sealedIndexFrom(ctx, n.receiver, &protocol.SealedIndex{Folder: "f", Records: []*protocol.SealedRecord{rec("e", 6, 11)}}); err != nil {
		t.Fatal(err)
	}
	check(6, 11, 11, 6)
}
