package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/zstd"
	"google.golang.org/protobuf/encoding/protowire"

	"lockstep/chunk"
	"lockstep/crypt"
	"lockstep/sync/protocol"
)

// newIdentity makes an identity in memory, as crypt does on disk: an
// Ed25519 key and a self-signed certificate.
func newIdentity() (*crypt.Identity, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "hostile"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, pub, priv)
	if err != nil {
		return nil, err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	cert := tls.Certificate{Certificate: [][]byte{der}, PrivateKey: priv, Leaf: leaf}
	return &crypt.Identity{Certificate: cert, Leaf: leaf, ID: crypt.DeviceIDFromCert(leaf)}, nil
}

// handshakeOnce connects as a fresh identity the node does not know. It
// reports whether the node refused it (as it must); a TLS 1.3 client
// learns that only at its first read.
func handshakeOnce(ctx context.Context, cfg *config) (id crypt.DeviceID, refused bool, err error) {
	ident, err := newIdentity()
	if err != nil {
		return id, false, err
	}
	ctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	var d net.Dialer
	raw, err := d.DialContext(ctx, "tcp", cfg.to)
	if err != nil {
		return ident.ID, false, err
	}
	defer raw.Close()
	deadline, _ := ctx.Deadline()
	raw.SetDeadline(deadline)
	tc := tls.Client(raw, crypt.ClientTLSConfig(ident, cfg.node))
	if err := tc.HandshakeContext(ctx); err != nil {
		return ident.ID, true, nil
	}
	var b [1]byte
	_, err = tc.Read(b[:])
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return ident.ID, false, err
	}
	return ident.ID, err != nil, nil
}

// floodHandshakes connects as cfg.count fresh identities, cfg.parallel at
// once, the last one alone after all others, and reports how many the
// node refused and the last one's ID (the newest pending device).
func floodHandshakes(ctx context.Context, cfg *config, out *output) error {
	start := time.Now()
	var refused, accepted, failed atomic.Int64
	var firstErr atomic.Value
	tally := func(ok bool, err error) {
		switch {
		case err != nil:
			failed.Add(1)
			firstErr.CompareAndSwap(nil, err.Error())
		case ok:
			refused.Add(1)
		default:
			accepted.Add(1)
		}
	}
	next := make(chan struct{})
	var wg sync.WaitGroup
	for range cfg.parallel {
		wg.Go(func() {
			for range next {
				_, ok, err := handshakeOnce(ctx, cfg)
				tally(ok, err)
			}
		})
	}
feed:
	for range cfg.count - 1 {
		select {
		case next <- struct{}{}:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return err
	}
	last, ok, err := handshakeOnce(ctx, cfg)
	tally(ok, err)
	f := map[string]any{
		"attempted": cfg.count, "refused": refused.Load(), "accepted": accepted.Load(), "failed": failed.Load(),
		"last": last.String(), "seconds": time.Since(start).Seconds(),
	}
	if e := firstErr.Load(); e != nil {
		f["firstErr"] = e
	}
	out.emit("flood-handshakes", f)
	return nil
}

// floodIndex shares the folder as a trusted peer and sends cfg.messages
// Index frames (then IndexUpdates) of up to cfg.records tiny records each
// (deleted files the node never had, so a node that takes them writes
// nothing to disk), each frame as large as the protocol allows once
// decompressed and small on the wire. The frames are built by hand: a
// million protobuf structs would cost this process more than the node.
// Then it announces one real file: the node, which handles a peer's index
// messages in order, asks for its block only once it has dealt with the
// flood ("drained"). It waits for that, the node ending the connection,
// or -duration from its start.
func floodIndex(ctx context.Context, cfg *config, id *crypt.Identity, out *output) error {
	ctx, cancel := context.WithTimeout(ctx, cfg.duration)
	defer cancel()
	tc, err := dial(ctx, cfg, id)
	if err != nil {
		return err
	}
	defer tc.Close()
	// A write the node does not read (it is busy with the last frame) ends
	// with ctx.
	defer context.AfterFunc(ctx, func() { tc.Close() })()
	w := &lockedWriter{w: tc}
	err = protocol.WriteMessage(w, &protocol.ClusterConfig{Folders: []*protocol.Folder{{
		Id: cfg.folder, Label: cfg.folder,
		Devices: []*protocol.FolderDevice{
			{DeviceId: id.ID[:], MaxSequence: int64(cfg.messages*cfg.records + 1), IndexId: indexID(id.ID)},
			{DeviceId: cfg.node[:]},
		},
	}}})
	if err != nil {
		return err
	}
	out.emit("connected", map[string]any{"device": id.ID.String()})
	const sentinel = "flood-sentinel.txt"
	content := []byte("the file announced after the flood\n")
	ended := make(chan error, 1)
	drained := make(chan struct{})
	go func() {
		var once sync.Once
		for {
			msg, err := protocol.ReadMessage(tc)
			if err != nil {
				ended <- err
				return
			}
			req, ok := msg.(*protocol.Request)
			if !ok {
				continue
			}
			resp := &protocol.Response{Id: req.GetId(), Code: protocol.ErrorCode_ERROR_CODE_NO_SUCH_FILE}
			if end := req.GetOffset() + int64(req.GetSize()); req.GetName() == sentinel && end <= int64(len(content)) {
				resp.Code, resp.Data = protocol.ErrorCode_ERROR_CODE_NO_ERROR, content[req.GetOffset():end]
				once.Do(func() { close(drained) })
			}
			if err := protocol.WriteMessage(w, resp); err != nil {
				ended <- err
				return
			}
		}
	}()
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest))
	if err != nil {
		return err
	}
	defer enc.Close()
	start := time.Now()
	short := uint64(id.ID.Short())
	var seq int64
	for m := range cfg.messages {
		body, n := floodBody(cfg.folder, short, &seq, cfg.records)
		typ := protocol.MessageType_MESSAGE_TYPE_INDEX_UPDATE
		if m == 0 {
			typ = protocol.MessageType_MESSAGE_TYPE_INDEX
		}
		z := enc.EncodeAll(body, nil)
		frame := binary.BigEndian.AppendUint32(nil, uint32(2+len(z)))
		frame = append(frame, byte(typ), 1) // flags: zstd
		frame = append(frame, z...)
		if _, err := w.Write(frame); err != nil {
			out.emit("flood-index-failed", map[string]any{"message": m, "err": err.Error()})
			break
		}
		out.emit("flood-index-sent", map[string]any{"message": m, "records": n, "bytes": len(body), "wire": len(frame)})
	}
	h := chunk.HashOf(content)
	seq++
	err = protocol.WriteMessage(w, &protocol.IndexUpdate{Folder: cfg.folder, Files: []*protocol.FileInfo{{
		Name: sentinel, Size: int64(len(content)), Permissions: 0o644, ModifiedNs: time.Now().UnixNano(), Sequence: seq,
		Version: &protocol.Vector{Counters: []*protocol.Counter{{Id: short, Value: 2}}}, ModifiedBy: short,
		Blocks: []*protocol.BlockInfo{{Size: uint32(len(content)), Hash: h[:]}},
	}}})
	if err != nil {
		out.emit("flood-index-failed", map[string]any{"message": -1, "err": err.Error()})
	}
	reason := ""
	select {
	case <-drained:
		out.emit("drained", map[string]any{"seconds": time.Since(start).Seconds()})
	case err := <-ended:
		if ctx.Err() == nil {
			reason = fmt.Sprint(err)
		}
	case <-ctx.Done():
	}
	out.emit("closed", map[string]any{"err": reason})
	return nil
}

// lockedWriter makes whole writes of frames safe for concurrent use.
type lockedWriter struct {
	mu sync.Mutex
	w  net.Conn
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.w.SetWriteDeadline(time.Now().Add(time.Minute))
	return l.w.Write(b)
}

// floodBody is the protobuf body of an Index of up to n deleted files, as
// many as fit in a frame once decompressed; it returns how many it holds.
func floodBody(folder string, short uint64, seq *int64, n int) ([]byte, int) {
	limit := protocol.MaxFrameSize - 4<<10
	body := protowire.AppendTag(nil, 1, protowire.BytesType)
	body = protowire.AppendString(body, folder)
	body = append(make([]byte, 0, min(limit, 40*n+len(body))), body...)
	var counter, vector, rec []byte
	counter = protowire.AppendTag(counter, 1, protowire.VarintType)
	counter = protowire.AppendVarint(counter, short)
	counter = protowire.AppendTag(counter, 2, protowire.VarintType)
	counter = protowire.AppendVarint(counter, 1)
	vector = protowire.AppendTag(vector, 1, protowire.BytesType)
	vector = protowire.AppendBytes(vector, counter)
	for i := range n {
		*seq++
		rec = rec[:0]
		rec = protowire.AppendTag(rec, 1, protowire.BytesType)
		rec = protowire.AppendString(rec, fmt.Sprintf("f%x", *seq))
		rec = protowire.AppendTag(rec, 6, protowire.VarintType) // deleted
		rec = protowire.AppendVarint(rec, 1)
		rec = protowire.AppendTag(rec, 8, protowire.BytesType) // version
		rec = protowire.AppendBytes(rec, vector)
		rec = protowire.AppendTag(rec, 9, protowire.VarintType) // sequence
		rec = protowire.AppendVarint(rec, uint64(*seq))
		if len(body)+len(rec)+8 > limit {
			*seq--
			return body, i
		}
		body = protowire.AppendTag(body, 2, protowire.BytesType)
		body = protowire.AppendBytes(body, rec)
	}
	return body, n
}
