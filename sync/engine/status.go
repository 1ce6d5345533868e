package engine

import (
	"lockstep/crypt"
	"lockstep/sync/index"
)

// FolderStatus is a folder's state for status reports.
type FolderStatus struct {
	ID    string
	State string
	Error string
	index.Counts
	// PullTotal and PullDone are the bytes of the pull under way.
	PullTotal, PullDone int64
	// PulledBytes and ReusedBytes count, since the node started, block
	// bytes fetched from peers and those copied from local files instead;
	// PulledBlocks the blocks fetched.
	PulledBytes, ReusedBytes, PulledBlocks int64
	// HashedBytes counts, since the node started, the bytes its scans read
	// to chunk and hash files.
	HashedBytes int64
	// ResumedBytes counts, since the node started, the bytes pulls found
	// already written by an interrupted pull.
	ResumedBytes int64
	Peers        []PeerStatus
}

// PeerStatus is how far a peer sharing the folder is.
type PeerStatus struct {
	Device     crypt.DeviceID
	Connected  bool
	Completion float64
	// Untrusted: the peer is a receiver of the folder (sync/backup
	// reports how it stands).
	Untrusted bool
}

// FolderStatus reports a running folder's state, or the error that kept
// a folder that should run from starting; ok is false for a folder that
// is not running (not yet, or paused, or held for others).
func (e *Engine) FolderStatus(id string) (st FolderStatus, ok bool) {
	e.mu.Lock()
	f, failed := e.folders[id], e.failed[id]
	e.mu.Unlock()
	if f == nil {
		if failed != "" {
			return FolderStatus{ID: id, State: StateError, Error: failed}, true
		}
		return st, false
	}
	f.mu.Lock()
	st = FolderStatus{ID: id, State: f.shownState(), Error: f.err, PullTotal: f.pullTotal, PullDone: f.pullDone}
	shares := make([]PeerStatus, 0, len(f.shares))
	for d := range f.shares {
		shares = append(shares, PeerStatus{Device: d, Untrusted: f.receivers[d]})
	}
	f.mu.Unlock()
	st.Counts = f.set.Counts()
	st.PulledBytes, st.ReusedBytes, st.PulledBlocks = f.pulledBytes.Load(), f.reusedBytes.Load(), f.pulledBlocks.Load()
	st.HashedBytes = f.hashedBytes.Load()
	st.ResumedBytes = f.resumedBytes.Load()
	for _, p := range shares {
		p.Connected, p.Completion = e.opts.Net.Connected(p.Device), f.set.Completion(p.Device)
		st.Peers = append(st.Peers, p)
	}
	return st, true
}
