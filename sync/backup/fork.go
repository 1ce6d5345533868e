package backup

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"lockstep/crypt"
	"lockstep/storage/db"
	"lockstep/sync/protocol"
	"lockstep/sync/router"
)

// Fork detection between trusted devices. A receiver could show devices
// different histories: hide device D's newer records from device E while
// telling D it stored them. Each device alone sees a log that only grows,
// so the rollback checks cannot see it; comparing notes can.
//
// Each device D remembers, per (folder, receiver R): the highest of its
// own counters R served back and the R log sequence it came at (its
// db.ReceiverView's Held and HeldAt), and per origin O the highest counter
// of O seen in R's log and the high-water mark R announced for O in its
// ClusterConfig (db.ReceiverOrigins, which covers records R pruned). All
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

// originMark is what this device knows of one origin's records on a
// receiver.
type originMark struct {
	Seen uint64 // highest counter read in the receiver's log
	Mark uint64 // highest counter the receiver says it holds
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
func (b *Backup) originMarks(ctx context.Context, folderID string, receiver crypt.DeviceID) map[crypt.DeviceID]originMark {
	out := map[crypt.DeviceID]originMark{}
	raw, err := b.db.ReceiverOrigins(ctx, folderID, receiver.String())
	if err != nil {
		b.log.Warn("reading what a receiver holds per device", "folder", folderID, "device", receiver.String(), "err", err)
		return out
	}
	for k, m := range raw {
		if id, err := crypt.ParseDeviceID(k); err == nil {
			out[id] = originMark{Seen: m.Seen, Mark: m.Mark}
		}
	}
	return out
}

// raiseOrigins raises the stored seen counters and high-water marks of
// receiver's log to those given, where higher.
func (b *Backup) raiseOrigins(ctx context.Context, folderID string, receiver crypt.DeviceID, seen, marks map[crypt.DeviceID]uint64) error {
	if len(seen)+len(marks) == 0 {
		return nil
	}
	fw := &b.share(folderID).forks
	fw.mu.Lock()
	defer fw.mu.Unlock()
	raise := map[string]db.OriginMark{}
	for o, n := range seen {
		m := raise[o.String()]
		m.Seen = n
		raise[o.String()] = m
	}
	for o, n := range marks {
		m := raise[o.String()]
		m.Mark = n
		raise[o.String()] = m
	}
	return b.db.RaiseReceiverOrigins(ctx, folderID, receiver.String(), raise)
}

// forgetReceiverLog drops what this device knew of receiver's log: the
// log started over.
func (b *Backup) forgetReceiverLog(ctx context.Context, folderID string, receiver crypt.DeviceID) error {
	fw := &b.share(folderID).forks
	fw.mu.Lock()
	defer fw.mu.Unlock()
	return b.db.ForgetReceiverView(ctx, folderID, receiver.String())
}

// maxKeptClaims bounds the (receiver, origin) pairs a folder keeps
// claims for.
const maxKeptClaims = 4096

// addClaims keeps claims for checking. Beyond maxKeptClaims pairs, claims
// about new pairs are dropped.
func (b *Backup) addClaims(folderID string, claims []claim) {
	fw := &b.share(folderID).forks
	fw.mu.Lock()
	defer fw.mu.Unlock()
	if fw.claims == nil {
		fw.claims = map[[2]crypt.DeviceID][]claim{}
	}
	for _, c := range claims {
		k := [2]crypt.DeviceID{c.receiver, c.origin}
		if _, ok := fw.claims[k]; !ok && len(fw.claims) >= maxKeptClaims {
			b.log.Debug("too many receiver claims kept; dropping one", "receiver", c.receiver.String(), "device", c.origin.String())
			continue
		}
		fw.claims[k] = append(fw.claims[k], c)
	}
}

// checkClaims judges the kept claims about receiver: those that hold are
// dropped, a fork is reported (and stays reported until its claim holds),
// the rest are kept for later.
func (b *Backup) checkClaims(ctx context.Context, f Folder, receiver crypt.DeviceID) {
	sh := b.share(f.ID())
	fw := &sh.forks
	fw.mu.Lock()
	defer fw.mu.Unlock()
	var keys [][2]crypt.DeviceID
	for k := range fw.claims {
		if k[0] == receiver {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return
	}
	// The cursor is read before the origins, which are written before it:
	// a cursor past s never comes with counters older than that.
	logID := b.logID(ctx, f.ID(), receiver)
	cursor := b.view(ctx, f.ID(), receiver).Cursor
	marks := b.originMarks(ctx, f.ID(), receiver)
	var fork *claim
	for _, k := range keys {
		var newest, forked *claim
		for _, c := range fw.claims[k] {
			v := receiverView{logID: logID, cursor: cursor, seen: marks[c.origin].Seen, mark: marks[c.origin].Mark}
			switch judge(c, v) {
			case claimHolds:
				f.Log().Debug("receiver claim holds", "receiver", receiver.String(), "device", c.origin.String(), "counter", c.counter, "sequence", c.sequence, "seen", v.seen, "mark", v.mark)
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
			delete(fw.claims, k)
		} else {
			fw.claims[k] = keep
		}
	}
	msg := ""
	if fork != nil {
		msg = fmt.Sprintf("receiver %s forked its log: it showed device %s its record %d at log sequence %d, but this device has read that far without it",
			receiver.Short(), fork.origin.Short(), fork.counter, fork.sequence)
	}
	if sh.setForkError(receiver, msg) && msg != "" {
		f.Log().Warn("receiver forked its log", "receiver", receiver.String(), "device", fork.origin.String(),
			"counter", fork.counter, "sequence", fork.sequence, "read", cursor, "seen", marks[fork.origin].Seen, "mark", marks[fork.origin].Mark)
	}
}

// setForkError sets or, with msg "", clears the fork reported for a
// receiver; it reports whether that changed anything.
func (s *share) setForkError(receiver crypt.DeviceID, msg string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.forkErrs[receiver] == msg {
		return false
	}
	if msg == "" {
		delete(s.forkErrs, receiver)
		return true
	}
	if s.forkErrs == nil {
		s.forkErrs = map[crypt.DeviceID]string{}
	}
	s.forkErrs[receiver] = msg
	return true
}

// receiverError is the problem status shows for a receiver: a fork first,
// then the latest other one. The caller holds s.mu.
func (s *share) receiverError(receiver crypt.DeviceID) string {
	var parts []string
	for _, e := range []string{s.forkErrs[receiver], s.stalled[receiver], s.recvErrs[receiver]} {
		if e != "" {
			parts = append(parts, e)
		}
	}
	return strings.Join(parts, "; ")
}

// setStalled sets or, with msg "", clears the report that a receiver
// takes no step with this device's uploads.
func (s *share) setStalled(receiver crypt.DeviceID, msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if msg == "" {
		delete(s.stalled, receiver)
		return
	}
	if s.stalled == nil {
		s.stalled = map[crypt.DeviceID]string{}
	}
	s.stalled[receiver] = msg
}

// ReceiverClaims takes a trusted peer's claims about receivers of folders
// both share, and checks each against this device's view of the receiver
// (see judge). Claims from an untrusted device end the connection with
// ErrUntrustedClaims; claims about folders not shared with the peer,
// receivers this device does not use, or another origin than the peer are
// ignored.
func (b *Backup) ReceiverClaims(p *router.Peer, rc *protocol.ReceiverClaims) error {
	peer, ctx := p.ID, p.Context()
	if dev, err := b.db.Device(ctx, peer.String()); err == nil && dev.Untrusted {
		return fmt.Errorf("%w %s", ErrUntrustedClaims, peer.Short())
	}
	type target struct {
		f        Folder
		receiver crypt.DeviceID
	}
	byFolder := map[string][]claim{}
	targets := map[target]bool{}
	for _, wc := range rc.GetClaims() {
		f := b.folders.Folder(wc.GetFolder())
		if f == nil {
			b.log.Debug("receiver claim for a folder not shared with the device", "folder", wc.GetFolder(), "device", peer.String())
			continue
		}
		shared, untrusted := f.SharedWith(peer)
		if !shared {
			b.log.Debug("receiver claim for a folder not shared with the device", "folder", wc.GetFolder(), "device", peer.String())
			continue
		}
		if untrusted {
			return fmt.Errorf("%w %s", ErrUntrustedClaims, peer.Short())
		}
		c := claim{receiver: crypt.DeviceID(wc.GetReceiver()), origin: crypt.DeviceID(wc.GetOrigin()),
			logID: wc.GetLogId(), counter: wc.GetCounter(), sequence: wc.GetSequence()}
		// Claims about a device this one shares the folder with as a
		// trusted peer are nonsense; about one it does not share with at
		// all, kept: it may become a receiver of the folder here later.
		if rs, ru := f.SharedWith(c.receiver); c.origin != peer || c.receiver == b.id || (rs && !ru) {
			continue
		}
		targets[target{f, c.receiver}] = true
		byFolder[f.ID()] = append(byFolder[f.ID()], c)
	}
	for id, claims := range byFolder {
		b.addClaims(id, claims)
	}
	for t := range targets {
		b.checkClaims(ctx, t.f, t.receiver)
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
func (b *Backup) claimsFor(ctx context.Context, peer crypt.DeviceID) []*protocol.ReceiverClaim {
	var out []*protocol.ReceiverClaim
	b.folders.Each(func(f Folder) {
		if shared, untrusted := f.SharedWith(peer); !shared || untrusted {
			return
		}
		for _, r := range f.Receivers() {
			// Held and held-at are written together, in one transaction.
			logID := b.logID(ctx, f.ID(), r)
			v := b.view(ctx, f.ID(), r)
			held, at := v.Held, v.HeldAt
			if logID == 0 || held <= 0 || at <= 0 || logID != b.logID(ctx, f.ID(), r) {
				continue
			}
			out = append(out, &protocol.ReceiverClaim{Folder: f.ID(), Receiver: r[:], LogId: logID, Origin: b.id[:], Counter: uint64(held), Sequence: at})
		}
	})
	slices.SortFunc(out, func(a, b *protocol.ReceiverClaim) int {
		return cmp.Or(cmp.Compare(a.GetFolder(), b.GetFolder()), cmp.Compare(string(a.GetReceiver()), string(b.GetReceiver())))
	})
	return out
}

// TrustedPeer starts sending claims to a trusted peer that shares a
// folder, unless that runs already.
func (b *Backup) TrustedPeer(p *router.Peer) {
	b.claims.notify() // claims for folders shared just now
	l := b.link(p)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.claiming {
		return
	}
	l.claiming = true
	p.Go(func() { b.sendClaims(p.Context(), p) })
}

// sendClaims sends the peer this device's claims now and again whenever
// they change, at most once per claimInterval, until ctx ends.
func (b *Backup) sendClaims(ctx context.Context, p *router.Peer) {
	var last []*protocol.ReceiverClaim
	var sentAt time.Time
	for {
		woken := b.claims.wait()
		cur := b.claimsFor(ctx, p.ID)
		if !slices.EqualFunc(cur, last, claimEqual) {
			for batch := range slices.Chunk(cur, protocol.MaxReceiverClaims) {
				if err := p.Conn.ReceiverClaims(ctx, &protocol.ReceiverClaims{Claims: batch}); err != nil {
					if ctx.Err() == nil {
						b.log.Debug("sending receiver claims", "device", p.ID.String(), "err", err)
					}
					return
				}
			}
			if len(cur) > 0 {
				b.log.Debug("sent receiver claims", "device", p.ID.String(), "claims", len(cur))
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
