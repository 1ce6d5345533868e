package engine

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"lockstep/crypt"
	"lockstep/storage/db"
	"lockstep/sync/protocol"
)

// Fork detection between trusted devices. A receiver could show devices
// different histories: hide device D's newer records from device E while
// telling D it stored them. Each device alone sees a log that only grows,
// so the rollback checks cannot see it; comparing notes can.
//
// Each device D remembers, per (folder, receiver R): the highest of its
// own counters R served back and the R log sequence it came at
// (receiver-held, receiver-held-at), and per origin O the highest counter
// of O seen in R's log and the high-water mark R announced for O in its
// ClusterConfig (receiver-origins, which covers records R pruned). All
// only go up while R's log ID stays the same.
//
// D tells each trusted peer E sharing the folder a claim: "R's log with
// this ID holds, at sequence s, my record with counter c". E judges it:
// if E has read R's log (same ID) up to s or further, and yet neither saw
// D's record c or a later one there nor was told by R that it holds D's
// records up to c, R showed E a different log: it forked. That is only
// reported (folder status, a warning), never acted on: a claim is what
// another device says, the check rests on both devices' records being
// right, and a false alarm must not stop anyone's sync. The report stays
// until the claim holds.

// claimInterval is the least time between two claim messages to a peer.
var claimInterval = 10 * time.Second

// ErrUntrustedClaims means an untrusted device sent receiver claims,
// which only trusted devices exchange.
var ErrUntrustedClaims = errors.New("receiver claims from an untrusted device")

// heldAtSetting is the receiver's log sequence at which it served this
// device's record whose counter is in heldSetting.
func heldAtSetting(folderID string, dev crypt.DeviceID) string {
	return "receiver-held-at/" + folderID + "/" + dev.String()
}

// originsSetting holds, per origin, the highest counter seen in a
// receiver's log and the receiver's announced high-water mark (JSON).
func originsSetting(folderID string, dev crypt.DeviceID) string {
	return "receiver-origins/" + folderID + "/" + dev.String()
}

// originMark is what this device knows of one origin's records on a
// receiver.
type originMark struct {
	Seen uint64 `json:"seen,omitempty"` // highest counter read in the receiver's log
	Mark uint64 `json:"mark,omitempty"` // highest counter the receiver says it holds
}

// claim is one receiver claim: origin's record with this counter is in
// receiver's log (log ID) at this sequence.
type claim struct {
	receiver, origin crypt.DeviceID
	logID, counter   uint64
	sequence         int64
}

// receiverView is what this device knows of a receiver's log, for one
// claim's origin.
type receiverView struct {
	logID      uint64 // the receiver's log ID; 0 when never seen
	cursor     int64  // highest sequence read
	seen, mark uint64 // of the claim's origin
}

// verdict is the outcome of judging a claim.
type verdict int

const (
	claimMoot    verdict = iota // another log, or one this device never read
	claimPending                // not read that far yet: check again later
	claimHolds                  // this device saw the record, or R says it holds it
	claimForked                 // read that far without it: R forked its log
)

// judge checks claim c against this device's view of the receiver's log.
func judge(c claim, v receiverView) verdict {
	switch {
	case v.logID == 0 || v.logID != c.logID:
		return claimMoot
	case v.seen >= c.counter || v.mark >= c.counter:
		return claimHolds
	case v.cursor < c.sequence:
		return claimPending
	}
	return claimForked
}

// forkWatch is a folder's claims from peers awaiting a check, and whose
// forks it reports. Its zero value is ready to use.
type forkWatch struct {
	mu sync.Mutex // serialises checks and receiver-origins writes
	// By (receiver, origin): the newest claim, and the newest that was
	// judged forked (kept until it holds, however the claims advance).
	claims map[[2]crypt.DeviceID][]claim
}

// originMarks reads what this device knows per origin of receiver's log.
func (e *Engine) originMarks(ctx context.Context, folderID string, receiver crypt.DeviceID) map[crypt.DeviceID]originMark {
	out := map[crypt.DeviceID]originMark{}
	s, err := e.db.Setting(ctx, originsSetting(folderID, receiver))
	if err != nil {
		return out
	}
	var raw map[string]originMark
	if json.Unmarshal([]byte(s), &raw) != nil {
		return out
	}
	for k, m := range raw {
		if id, err := crypt.ParseDeviceID(k); err == nil {
			out[id] = m
		}
	}
	return out
}

// raiseOrigins raises the stored seen counters and high-water marks of
// receiver's log to those given, where higher; it writes only if one rose.
func (f *folder) raiseOrigins(ctx context.Context, receiver crypt.DeviceID, seen, marks map[crypt.DeviceID]uint64) error {
	f.forks.mu.Lock()
	defer f.forks.mu.Unlock()
	cur := f.e.originMarks(ctx, f.id, receiver)
	rose := false
	for o, n := range seen {
		if m := cur[o]; n > m.Seen {
			m.Seen, rose = n, true
			cur[o] = m
		}
	}
	for o, n := range marks {
		if m := cur[o]; n > m.Mark {
			m.Mark, rose = n, true
			cur[o] = m
		}
	}
	if !rose {
		return nil
	}
	raw := make(map[string]originMark, len(cur))
	for o, m := range cur {
		raw[o.String()] = m
	}
	b, err := json.Marshal(raw)
	if err != nil {
		return err
	}
	return f.e.db.SetSetting(ctx, originsSetting(f.id, receiver), string(b))
}

// forgetReceiverLog drops what this device knew of receiver's log beyond
// its cursor and held counter (the caller drops those): the log started
// over.
func (f *folder) forgetReceiverLog(ctx context.Context, receiver crypt.DeviceID) error {
	f.forks.mu.Lock()
	defer f.forks.mu.Unlock()
	for _, key := range []string{heldAtSetting(f.id, receiver), originsSetting(f.id, receiver)} {
		if err := f.e.db.DeleteSetting(ctx, key); err != nil && !errors.Is(err, db.ErrNotFound) {
			return err
		}
	}
	return nil
}

// maxKeptClaims bounds the (receiver, origin) pairs a folder keeps
// claims for.
const maxKeptClaims = 4096

// addClaims keeps claims for checking. Beyond maxKeptClaims pairs, claims
// about new pairs are dropped.
func (f *folder) addClaims(claims []claim) {
	f.forks.mu.Lock()
	defer f.forks.mu.Unlock()
	if f.forks.claims == nil {
		f.forks.claims = map[[2]crypt.DeviceID][]claim{}
	}
	for _, c := range claims {
		k := [2]crypt.DeviceID{c.receiver, c.origin}
		if _, ok := f.forks.claims[k]; !ok && len(f.forks.claims) >= maxKeptClaims {
			f.log.Debug("too many receiver claims kept; dropping one", "receiver", c.receiver.String(), "device", c.origin.String())
			continue
		}
		f.forks.claims[k] = append(f.forks.claims[k], c)
	}
}

// checkClaims judges the kept claims about receiver: those that hold are
// dropped, a fork is reported (and stays reported until its claim holds),
// the rest are kept for later.
func (f *folder) checkClaims(ctx context.Context, receiver crypt.DeviceID) {
	f.forks.mu.Lock()
	defer f.forks.mu.Unlock()
	var keys [][2]crypt.DeviceID
	for k := range f.forks.claims {
		if k[0] == receiver {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return
	}
	e := f.e
	// The cursor is read before the origins, which are written before it:
	// a cursor past s never comes with counters older than that.
	logID := e.peerIndexID(ctx, f.id, receiver)
	cursor := e.settingInt(ctx, logCursorSetting(f.id, receiver))
	marks := e.originMarks(ctx, f.id, receiver)
	var fork *claim
	for _, k := range keys {
		var newest, forked *claim
		for _, c := range f.forks.claims[k] {
			v := receiverView{logID: logID, cursor: cursor, seen: marks[c.origin].Seen, mark: marks[c.origin].Mark}
			switch judge(c, v) {
			case claimHolds:
				f.log.Debug("receiver claim holds", "receiver", receiver.String(), "device", c.origin.String(), "counter", c.counter, "sequence", c.sequence, "seen", v.seen, "mark", v.mark)
				continue
			case claimForked:
				if forked == nil || c.counter > forked.counter {
					forked = &c
				}
			}
			if newest == nil || c.counter > newest.counter || c.logID != newest.logID {
				newest = &c
			}
		}
		var keep []claim
		if forked != nil {
			keep = append(keep, *forked)
			if fork == nil || forked.counter > fork.counter {
				fork = forked
			}
		}
		if newest != nil && (forked == nil || *newest != *forked) {
			keep = append(keep, *newest)
		}
		if len(keep) == 0 {
			delete(f.forks.claims, k)
		} else {
			f.forks.claims[k] = keep
		}
	}
	msg := ""
	if fork != nil {
		msg = fmt.Sprintf("receiver %s forked its log: it showed device %s its record %d at log sequence %d, but this device has read that far without it",
			receiver.Short(), fork.origin.Short(), fork.counter, fork.sequence)
	}
	if f.setForkError(receiver, msg) && msg != "" {
		f.log.Warn("receiver forked its log", "receiver", receiver.String(), "device", fork.origin.String(),
			"counter", fork.counter, "sequence", fork.sequence, "read", cursor, "seen", marks[fork.origin].Seen, "mark", marks[fork.origin].Mark)
	}
}

// setForkError sets or, with msg "", clears the fork reported for a
// receiver; it reports whether that changed anything.
func (f *folder) setForkError(receiver crypt.DeviceID, msg string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.forkErrs[receiver] == msg {
		return false
	}
	if msg == "" {
		delete(f.forkErrs, receiver)
		return true
	}
	if f.forkErrs == nil {
		f.forkErrs = map[crypt.DeviceID]string{}
	}
	f.forkErrs[receiver] = msg
	return true
}

// receiverError is the problem status shows for a receiver: a fork first,
// then the latest other one. The caller holds f.mu.
func (f *folder) receiverError(receiver crypt.DeviceID) string {
	fork, other := f.forkErrs[receiver], f.recvErrs[receiver]
	switch {
	case fork == "":
		return other
	case other == "":
		return fork
	}
	return fork + "; " + other
}

// ReceiverClaims takes a trusted peer's claims about receivers of folders
// both share, and checks each against this device's view of the receiver
// (see judge). Claims from an untrusted device end the connection with
// ErrUntrustedClaims; claims about folders not shared with the peer,
// receivers this device does not use, or another origin than the peer are
// ignored.
func (e *Engine) ReceiverClaims(wirePeer protocol.DeviceID, rc *protocol.ReceiverClaims) error {
	peer := crypt.DeviceID(wirePeer)
	ctx := context.Background()
	if pc := e.conn(peer); pc != nil {
		ctx = pc.ctx
	}
	if dev, err := e.db.Device(ctx, peer.String()); err == nil && dev.Untrusted {
		return fmt.Errorf("%w %s", ErrUntrustedClaims, peer.Short())
	}
	type target struct {
		f        *folder
		receiver crypt.DeviceID
	}
	byFolder := map[*folder][]claim{}
	targets := map[target]bool{}
	for _, wc := range rc.GetClaims() {
		f := e.folder(wc.GetFolder())
		if f == nil || !f.sharedWith(peer) || (e.recv != nil && e.recv.Holds(wc.GetFolder())) {
			e.log.Debug("receiver claim for a folder not shared with the device", "folder", wc.GetFolder(), "device", peer.String())
			continue
		}
		if f.untrusted(peer) {
			return fmt.Errorf("%w %s", ErrUntrustedClaims, peer.Short())
		}
		c := claim{receiver: crypt.DeviceID(wc.GetReceiver()), origin: crypt.DeviceID(wc.GetOrigin()),
			logID: wc.GetLogId(), counter: wc.GetCounter(), sequence: wc.GetSequence()}
		// Claims about a device this one shares the folder with as a
		// trusted peer are nonsense; about one it does not share with at
		// all, kept: it may become a receiver of the folder here later.
		if c.origin != peer || c.receiver == e.id || (f.sharedWith(c.receiver) && !f.untrusted(c.receiver)) {
			continue
		}
		targets[target{f, c.receiver}] = true
		byFolder[f] = append(byFolder[f], c)
	}
	for f, claims := range byFolder {
		f.addClaims(claims)
	}
	for t := range targets {
		t.f.checkClaims(ctx, t.receiver)
	}
	return nil
}

// claimSignal wakes the claim senders when a claim may have advanced. Its
// zero value is ready to use.
type claimSignal struct {
	mu sync.Mutex
	ch chan struct{}
}

// wait returns a channel closed at the next notify.
func (s *claimSignal) wait() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch == nil {
		s.ch = make(chan struct{})
	}
	return s.ch
}

// notify wakes every waiter.
func (s *claimSignal) notify() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch != nil {
		close(s.ch)
		s.ch = nil
	}
}

// claimsFor returns this device's claims for a trusted peer: for every
// folder both share, for every receiver of it, the highest own counter it
// served back and where. Sorted, so equal sets compare equal.
func (e *Engine) claimsFor(ctx context.Context, peer crypt.DeviceID) []*protocol.ReceiverClaim {
	var out []*protocol.ReceiverClaim
	for _, f := range e.runningFolders() {
		if !f.sharedWith(peer) || f.untrusted(peer) {
			continue
		}
		f.mu.Lock()
		receivers := make([]crypt.DeviceID, 0, len(f.receivers))
		for r := range f.receivers {
			receivers = append(receivers, r)
		}
		f.mu.Unlock()
		for _, r := range receivers {
			// Held is read before held-at, which is written first: a
			// claim may name a later sequence than its record's, never an
			// earlier one.
			logID := e.peerIndexID(ctx, f.id, r)
			held := e.settingInt(ctx, heldSetting(f.id, r))
			at := e.settingInt(ctx, heldAtSetting(f.id, r))
			if logID == 0 || held <= 0 || at <= 0 || logID != e.peerIndexID(ctx, f.id, r) {
				continue
			}
			out = append(out, &protocol.ReceiverClaim{Folder: f.id, Receiver: r[:], LogId: logID, Origin: e.id[:], Counter: uint64(held), Sequence: at})
		}
	}
	slices.SortFunc(out, func(a, b *protocol.ReceiverClaim) int {
		return cmp.Or(cmp.Compare(a.GetFolder(), b.GetFolder()), cmp.Compare(string(a.GetReceiver()), string(b.GetReceiver())))
	})
	return out
}

// startClaims starts sending claims to the peer, unless that runs already.
func (pc *peerConn) startClaims() {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if pc.claiming {
		return
	}
	pc.claiming = true
	pc.wg.Go(func() { pc.sendClaims(pc.ctx) })
}

// sendClaims sends the peer this device's claims now and again whenever
// they change, at most once per claimInterval, until ctx ends.
func (pc *peerConn) sendClaims(ctx context.Context) {
	var last []*protocol.ReceiverClaim
	var sentAt time.Time
	for {
		woken := pc.e.claims.wait()
		cur := pc.e.claimsFor(ctx, pc.id)
		if !slices.EqualFunc(cur, last, claimEqual) {
			for batch := range slices.Chunk(cur, protocol.MaxReceiverClaims) {
				if err := pc.conn.ReceiverClaims(ctx, &protocol.ReceiverClaims{Claims: batch}); err != nil {
					if ctx.Err() == nil {
						pc.e.log.Debug("sending receiver claims", "device", pc.id.String(), "err", err)
					}
					return
				}
			}
			if len(cur) > 0 {
				pc.e.log.Debug("sent receiver claims", "device", pc.id.String(), "claims", len(cur))
			}
			last, sentAt = cur, time.Now()
		}
		select {
		case <-woken:
		case <-ctx.Done():
			return
		}
		if wait := time.Until(sentAt.Add(claimInterval)); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return
			}
		}
	}
}

func claimEqual(a, b *protocol.ReceiverClaim) bool {
	return a.GetFolder() == b.GetFolder() && string(a.GetReceiver()) == string(b.GetReceiver()) &&
		a.GetLogId() == b.GetLogId() && a.GetCounter() == b.GetCounter() && a.GetSequence() == b.GetSequence()
}

// setHeldAt stores the log sequence of this device's highest record a
// receiver served back, before heldSetting is raised to its counter.
func (e *Engine) setHeldAt(ctx context.Context, folderID string, receiver crypt.DeviceID, seq int64) error {
	return e.db.SetSetting(ctx, heldAtSetting(folderID, receiver), strconv.FormatInt(seq, 10))
}
