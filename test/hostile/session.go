package main

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sort"
	"sync"
	"time"

	"lockstep/chunk"
	"lockstep/crypt"
	"lockstep/sync/connections"
	"lockstep/sync/protocol"
)

// dialTimeout bounds the TCP connect, the TLS handshake and the Hello.
const dialTimeout = 10 * time.Second

// dial connects to the node as id: TCP, TLS 1.3 pinned to the node's ID,
// and the Hello exchange, as the connection service and the router do.
func dial(ctx context.Context, cfg *config, id *crypt.Identity) (*connections.BatchConn, error) {
	dctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	var d net.Dialer
	raw, err := d.DialContext(dctx, "tcp", cfg.to)
	if err != nil {
		return nil, err
	}
	tc := connections.Client(raw, crypt.ClientTLSConfig(id, cfg.node))
	if err := tc.HandshakeContext(dctx); err != nil {
		tc.Close()
		return nil, fmt.Errorf("TLS handshake: %w", err)
	}
	if _, err := protocol.ExchangeHello(dctx, tc, &protocol.Hello{DeviceName: "hostile", ClientName: "lockstep-hostile", ClientVersion: "test"}); err != nil {
		tc.Close()
		return nil, fmt.Errorf("hello: %w", err)
	}
	return tc, nil
}

// session is a protocol connection to the node as a device sharing the
// folder. It keeps the node's index of the folder, serves the blocks of
// what it announced, and reports what arrives.
type session struct {
	cfg  *config
	id   *crypt.Identity
	out  *output
	conn *protocol.Conn
	done chan struct{} // closed when the connection has ended
	err  error         // why, set before done closes

	// request answers the node's requests; nil serves announced blocks.
	request func(ctx context.Context, req *protocol.Request) ([]byte, error)
	// sealed takes the node's SealedIndex messages (receiver scenario).
	sealed func(idx *protocol.SealedIndex) error

	mu      sync.Mutex
	records map[string]*protocol.FileInfo // the node's index of the folder
	cc      *protocol.ClusterConfig       // the node's latest
	changed chan struct{}                 // closed and replaced on every change
	content map[string][]byte             // what this device serves, by name
	refuse  map[string]bool               // announced names it will not serve
	seq     int64                         // this device's last sequence
	counter uint64                        // this device's last version counter
}

// connect dials the node and starts serving the connection.
func connect(ctx context.Context, cfg *config, id *crypt.Identity, out *output) (*session, error) {
	tc, err := dial(ctx, cfg, id)
	if err != nil {
		return nil, err
	}
	s := &session{
		cfg: cfg, id: id, out: out, done: make(chan struct{}),
		records: map[string]*protocol.FileInfo{}, changed: make(chan struct{}),
		content: map[string][]byte{}, refuse: map[string]bool{},
		counter: uint64(time.Now().Unix()),
	}
	s.conn = protocol.NewConn(protocol.DeviceID(cfg.node), tc, s, protocol.Options{})
	go func() {
		s.err = s.conn.Serve(ctx)
		close(s.done)
	}()
	out.emit("connected", map[string]any{"device": id.ID.String()})
	return s, nil
}

// close ends the connection and reports why it ended.
func (s *session) close() {
	s.conn.Close("done")
	<-s.done
	reason := ""
	if s.err != nil {
		reason = s.err.Error()
	}
	s.out.emit("closed", map[string]any{"err": reason})
}

// linger keeps the connection up for -duration, or until it ends or ctx
// does.
func (s *session) linger(ctx context.Context) {
	t := time.NewTimer(s.cfg.duration)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	case <-s.done:
	}
	s.close()
}

// notify wakes waiters; s.mu is held.
func (s *session) notify() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// waitFor waits until cond, called with s.mu held, holds.
func (s *session) waitFor(ctx context.Context, what string, d time.Duration, cond func() bool) error {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		ok, ch := cond(), s.changed
		s.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ch:
		case <-deadline.C:
			return fmt.Errorf("waiting for %s: timed out after %v", what, d)
		case <-ctx.Done():
			return ctx.Err()
		case <-s.done:
			return fmt.Errorf("waiting for %s: connection ended: %w", what, s.err)
		}
	}
}

// waitFiles waits until the node's index has every name, not deleted.
func (s *session) waitFiles(ctx context.Context, names ...string) error {
	return s.waitFor(ctx, fmt.Sprintf("the node to announce %q", names), 20*time.Second, func() bool {
		for _, n := range names {
			if r := s.records[n]; r == nil || r.GetDeleted() {
				return false
			}
		}
		return true
	})
}

// record returns the node's record of name, or nil.
func (s *session) record(name string) *protocol.FileInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.records[name]
}

// folderEntry is this device's cluster config entry for the folder.
type folderEntry struct {
	polynomial uint64
	fixed      bool
	// maxSequence is this device's highest sequence, if more than it
	// announced so far.
	maxSequence int64
}

// sendClusterConfig says this device shares the folder with the node, and
// asks for the node's whole index.
func (s *session) sendClusterConfig(ctx context.Context, e folderEntry) error {
	s.mu.Lock()
	seq := max(s.seq, e.maxSequence)
	s.mu.Unlock()
	return s.conn.ClusterConfig(ctx, &protocol.ClusterConfig{Folders: []*protocol.Folder{{
		Id: s.cfg.folder, Label: s.cfg.folder, Polynomial: e.polynomial, PolynomialFixed: e.fixed,
		Devices: []*protocol.FolderDevice{
			{DeviceId: s.id.ID[:], Name: "hostile", MaxSequence: seq, IndexId: indexID(s.id.ID)},
			{DeviceId: s.cfg.node[:], MaxSequence: 0},
		},
	}}})
}

// indexID is this device's index ID: stable per identity, never 0.
func indexID(id crypt.DeviceID) uint64 {
	return binary.BigEndian.Uint64(id[8:16]) | 1
}

// nextVersion returns a version vector made by this device alone, newer
// than any it made before.
func (s *session) nextVersion() *protocol.Vector {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.counter = max(s.counter+1, uint64(time.Now().Unix()))
	return &protocol.Vector{Counters: []*protocol.Counter{{Id: uint64(s.id.ID.Short()), Value: s.counter}}}
}

// file is a record of this device's for content, with version v. The
// content is served to the node unless refused.
func (s *session) file(name string, content []byte, perm uint32, v *protocol.Vector) *protocol.FileInfo {
	fi := &protocol.FileInfo{
		Name: name, Size: int64(len(content)), Permissions: perm, ModifiedNs: time.Now().UnixNano(),
		Version: v, ModifiedBy: uint64(s.id.ID.Short()),
	}
	for off := 0; off < len(content); off += chunk.MinSize {
		end := min(off+chunk.MinSize, len(content))
		h := chunk.HashOf(content[off:end])
		fi.Blocks = append(fi.Blocks, &protocol.BlockInfo{Offset: int64(off), Size: uint32(end - off), Hash: h[:]})
	}
	s.mu.Lock()
	s.content[name] = content
	s.mu.Unlock()
	return fi
}

// symlink is a record of this device's for a symlink to target.
func (s *session) symlink(name, target string) *protocol.FileInfo {
	return &protocol.FileInfo{
		Name: name, Type: protocol.FileInfoType_FILE_INFO_TYPE_SYMLINK, SymlinkTarget: target,
		Permissions: 0o777, ModifiedNs: time.Now().UnixNano(), Version: s.nextVersion(), ModifiedBy: uint64(s.id.ID.Short()),
	}
}

// announce sends files as an Index (first) or IndexUpdate, each with the
// next sequence of this device.
func (s *session) announce(ctx context.Context, full bool, files ...*protocol.FileInfo) error {
	s.mu.Lock()
	for _, fi := range files {
		s.seq++
		fi.Sequence = s.seq
	}
	s.mu.Unlock()
	var err error
	if full {
		err = s.conn.Index(ctx, &protocol.Index{Folder: s.cfg.folder, Files: files})
	} else {
		err = s.conn.IndexUpdate(ctx, &protocol.IndexUpdate{Folder: s.cfg.folder, Files: files})
	}
	if err != nil {
		return err
	}
	for _, fi := range files {
		f := recordFields(s.cfg.folder, fi)
		s.out.emit("announced", f)
	}
	return nil
}

// sortCounters puts a vector in the protocol's order.
func sortCounters(v *protocol.Vector) {
	sort.Slice(v.Counters, func(i, j int) bool { return v.Counters[i].GetId() < v.Counters[j].GetId() })
}

// ClusterConfig implements protocol.Model.
func (s *session) ClusterConfig(_ protocol.DeviceID, cc *protocol.ClusterConfig) error {
	for _, f := range cc.GetFolders() {
		var devices []map[string]any
		for _, d := range f.GetDevices() {
			devices = append(devices, map[string]any{
				"id": crypt.DeviceID(d.GetDeviceId()).String(), "maxSequence": d.GetMaxSequence(),
				"indexID": d.GetIndexId(), "encrypted": d.GetEncrypted(),
			})
		}
		s.out.emit("cluster-config", map[string]any{
			"folder": f.GetId(), "type": f.GetType().String(), "polynomial": f.GetPolynomial(),
			"fixed": f.GetPolynomialFixed(), "devices": devices,
		})
	}
	s.mu.Lock()
	s.cc = cc
	s.notify()
	s.mu.Unlock()
	return nil
}

// Index implements protocol.Model.
func (s *session) Index(_ protocol.DeviceID, idx *protocol.Index) error {
	s.takeIndex(idx.GetFolder(), idx.GetFiles())
	return nil
}

// IndexUpdate implements protocol.Model.
func (s *session) IndexUpdate(_ protocol.DeviceID, idx *protocol.IndexUpdate) error {
	s.takeIndex(idx.GetFolder(), idx.GetFiles())
	return nil
}

func (s *session) takeIndex(folder string, files []*protocol.FileInfo) {
	for _, fi := range files {
		s.out.emit("record", recordFields(folder, fi))
	}
	if folder != s.cfg.folder {
		return
	}
	s.mu.Lock()
	for _, fi := range files {
		s.records[fi.GetName()] = fi
	}
	s.notify()
	s.mu.Unlock()
}

// Request implements protocol.Model: by default, the blocks of files this
// device announced, and nothing else.
func (s *session) Request(ctx context.Context, _ protocol.DeviceID, req *protocol.Request) ([]byte, error) {
	if s.request != nil {
		return s.request(ctx, req)
	}
	s.mu.Lock()
	data, ok := s.content[req.GetName()]
	refused := s.refuse[req.GetName()]
	s.mu.Unlock()
	end := req.GetOffset() + int64(req.GetSize())
	served := ok && !refused && req.GetKind() == protocol.RequestKind_REQUEST_KIND_FILE_BLOCK && end <= int64(len(data))
	s.out.emit("requested", map[string]any{
		"folder": req.GetFolder(), "name": req.GetName(), "kind": req.GetKind().String(),
		"offset": req.GetOffset(), "size": req.GetSize(), "served": served,
	})
	if !served {
		return nil, protocol.ErrNoSuchFile
	}
	return data[req.GetOffset():end], nil
}

// SealedIndex implements protocol.SealedModel.
func (s *session) SealedIndex(_ protocol.DeviceID, idx *protocol.SealedIndex) error {
	if s.sealed == nil {
		return errors.New("sealed index to a trusted device")
	}
	return s.sealed(idx)
}

// SealedAck implements protocol.SealedModel.
func (s *session) SealedAck(protocol.DeviceID, *protocol.SealedAck) error { return nil }

// Closed implements protocol.Model.
func (s *session) Closed(protocol.DeviceID, error) {}

// randomBytes returns n random bytes.
func randomBytes(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

var (
	_ protocol.Model       = (*session)(nil)
	_ protocol.SealedModel = (*session)(nil)
)
