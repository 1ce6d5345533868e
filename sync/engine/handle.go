package engine

import (
	"context"
	"log/slog"

	"lockstep/crypt"
	"lockstep/sync/fsys"
	"lockstep/sync/index"
	"lockstep/sync/protocol"
)

// Folder is a handle on a running folder for the sending side of its
// encrypted shares (sync/backup): what it reads and wakes, nothing of the
// loop itself. Two handles of the same running folder are equal; a
// restarted folder gets a new one.
type Folder struct{ f *folder }

// Folder returns a handle on a running folder; ok is false when it does
// not run.
func (e *Engine) Folder(id string) (h Folder, ok bool) {
	f := e.folder(id)
	return Folder{f}, f != nil
}

// EachFolder calls fn with a handle on every running folder.
func (e *Engine) EachFolder(fn func(Folder)) {
	for _, f := range e.runningFolders() {
		fn(Folder{f})
	}
}

func (h Folder) ID() string             { return h.f.id }
func (h Folder) Log() *slog.Logger      { return h.f.log }
func (h Folder) Index() *index.Set      { return h.f.set }
func (h Folder) Root() *fsys.Root       { return h.f.fs }
func (h Folder) RequestPull()           { h.f.requestPull() }
func (h Folder) RequestScan(p []string) { h.f.requestScan(p) }

// IndexChanged returns a channel closed at the next local index change.
func (h Folder) IndexChanged() <-chan struct{} { return h.f.indexChanged() }

// ReadBlock reads size bytes of a local file at offset, into a buffer to
// give back with protocol.Recycle. Nothing checks them against a hash:
// the caller does.
func (h Folder) ReadBlock(name string, offset int64, size uint32) ([]byte, error) {
	return h.f.readBlock(&protocol.Request{Name: name, Offset: offset, Size: size})
}

// Polynomial is the folder's chunking polynomial.
func (h Folder) Polynomial(ctx context.Context) (uint64, error) {
	pol, err := h.f.polynomial(ctx)
	return uint64(pol), err
}

// Archive keeps the current file at name as a version, when versioning is
// on.
func (h Folder) Archive(name string) error {
	_, err := h.f.archived(name)
	return err
}

// Entry is the folder's own cluster config entry.
func (h Folder) Entry(ctx context.Context) (*protocol.Folder, error) { return h.f.entry(ctx) }

// SharedWith reports whether the folder is shared with dev, and whether
// dev is an untrusted receiver of it.
func (h Folder) SharedWith(dev crypt.DeviceID) (shared, untrusted bool) {
	return h.f.sharedWith(dev), h.f.untrusted(dev)
}

// Receivers lists the folder's untrusted receivers.
func (h Folder) Receivers() []crypt.DeviceID {
	h.f.mu.Lock()
	defer h.f.mu.Unlock()
	out := make([]crypt.DeviceID, 0, len(h.f.receivers))
	for d := range h.f.receivers {
		out = append(out, d)
	}
	return out
}
