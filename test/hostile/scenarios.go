package main

import (
	"context"
	"math"
	"time"

	"lockstep/crypt"
	"lockstep/sync/protocol"
)

// scenario plays one attack as identity id.
type scenario func(ctx context.Context, cfg *config, id *crypt.Identity, out *output) error

// scenarios by -scenario name; id and flood-handshakes are run directly.
var scenarios = map[string]scenario{
	"id":                   nil,
	"flood-handshakes":     nil,
	"observe":              observe,
	"max-counter":          maxCounter,
	"ignored-block":        ignoredBlock,
	"pull-loop":            pullLoop,
	"flood-index":          floodIndex,
	"bad-polynomial":       badPolynomial,
	"modes":                modes,
	"receiver-claims-huge": receiverClaimsHuge,
}

// observe is an honest trusted peer: it shares the folder, announces
// nothing, and reports what the node sends.
func observe(ctx context.Context, cfg *config, id *crypt.Identity, out *output) error {
	s, err := connect(ctx, cfg, id, out)
	if err != nil {
		return err
	}
	if err := s.sendClusterConfig(ctx, folderEntry{}); err != nil {
		return err
	}
	s.linger(ctx)
	return nil
}

// hundredYears is a century of 365.25 days in seconds, the unit of version
// counters (index.Vector.Update takes max(c+1, now in seconds)).
const hundredYears = 36525 * 24 * 60 * 60

// maxCounter waits for the node to announce cfg.files, then announces a
// newer version of each whose counter for the node's own ID is 2^64-1
// (the first file) or now+100 years (the others): taken as is, the node's
// next edit of the file would wrap to a small counter and lose, or carry a
// counter a century ahead.
func maxCounter(ctx context.Context, cfg *config, id *crypt.Identity, out *output) error {
	s, err := connect(ctx, cfg, id, out)
	if err != nil {
		return err
	}
	defer s.linger(ctx)
	if err := s.sendClusterConfig(ctx, folderEntry{}); err != nil {
		return err
	}
	if err := s.waitFiles(ctx, cfg.files...); err != nil {
		return err
	}
	nodeShort := uint64(cfg.node.Short())
	var files []*protocol.FileInfo
	for i, name := range cfg.files {
		hostile := uint64(math.MaxUint64)
		if i > 0 {
			hostile = uint64(time.Now().Unix()) + hundredYears
		}
		v := &protocol.Vector{}
		for _, c := range s.record(name).GetVersion().GetCounters() {
			if c.GetId() != nodeShort {
				v.Counters = append(v.Counters, &protocol.Counter{Id: c.GetId(), Value: c.GetValue()})
			}
		}
		mine := s.nextVersion().GetCounters()[0]
		v.Counters = append(v.Counters, &protocol.Counter{Id: nodeShort, Value: hostile}, mine)
		sortCounters(v)
		files = append(files, s.file(name, []byte("the hostile peer's version of "+name+"\n"), 0o644, v))
	}
	return s.announce(ctx, true, files...)
}

// ignoredBlock asks the node, by name, for blocks it must not serve: of
// the file it announced at another hash, offset or size than announced,
// and of every -probe (ignored files, names never announced). The block
// as announced is asked for too, and must be served.
func ignoredBlock(ctx context.Context, cfg *config, id *crypt.Identity, out *output) error {
	s, err := connect(ctx, cfg, id, out)
	if err != nil {
		return err
	}
	defer s.linger(ctx)
	if err := s.sendClusterConfig(ctx, folderEntry{}); err != nil {
		return err
	}
	if err := s.waitFiles(ctx, cfg.announce); err != nil {
		return err
	}
	b := s.record(cfg.announce).GetBlocks()[0]
	type try struct {
		what string
		req  *protocol.Request
	}
	tries := []try{
		{"announced", &protocol.Request{Name: cfg.announce, Offset: b.GetOffset(), Size: b.GetSize(), Hash: b.GetHash()}},
		{"other-hash", &protocol.Request{Name: cfg.announce, Offset: b.GetOffset(), Size: b.GetSize(), Hash: randomBytes(32)}},
	}
	if b.GetSize() > 1 {
		tries = append(tries,
			try{"other-offset", &protocol.Request{Name: cfg.announce, Offset: b.GetOffset() + 1, Size: b.GetSize() - 1}},
			try{"other-size", &protocol.Request{Name: cfg.announce, Offset: b.GetOffset(), Size: b.GetSize() - 1}})
	}
	for _, p := range cfg.probes {
		tries = append(tries, try{"probe", &protocol.Request{Name: p.name, Size: p.size}})
	}
	for _, t := range tries {
		t.req.Folder = cfg.folder
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		data, err := s.conn.Request(rctx, t.req)
		cancel()
		f := map[string]any{"what": t.what, "name": t.req.GetName(), "offset": t.req.GetOffset(), "size": t.req.GetSize(), "ok": err == nil}
		if err != nil {
			f["err"] = err.Error()
		} else {
			f["data"] = string(data[:min(len(data), 256)])
		}
		out.emit("request", f)
	}
	return nil
}

// pullLoop announces a symlink d to elsewhere and a file d/x beneath it,
// which the node cannot write without following the link (and, with
// -with-ignore, a .lockstepignore of "*"), then serves what it announced.
func pullLoop(ctx context.Context, cfg *config, id *crypt.Identity, out *output) error {
	s, err := connect(ctx, cfg, id, out)
	if err != nil {
		return err
	}
	defer s.linger(ctx)
	if err := s.sendClusterConfig(ctx, folderEntry{}); err != nil {
		return err
	}
	files := []*protocol.FileInfo{
		s.symlink("d", "elsewhere"),
		s.file("d/x", []byte("a file under a symlink\n"), 0o644, s.nextVersion()),
	}
	if cfg.withIgn {
		files = append(files, s.file(".lockstepignore", []byte("*\n"), 0o644, s.nextVersion()))
	}
	return s.announce(ctx, true, files...)
}

// badPolynomial shares the folder with a chunking polynomial fixed as 0x3
// (irreducible, but of degree 1) and a file, so a node that took it would
// chunk with it.
func badPolynomial(ctx context.Context, cfg *config, id *crypt.Identity, out *output) error {
	s, err := connect(ctx, cfg, id, out)
	if err != nil {
		return err
	}
	defer s.linger(ctx)
	// The cluster config says this device has files, as it will.
	if err := s.sendClusterConfig(ctx, folderEntry{polynomial: 0x3, fixed: true, maxSequence: 1}); err != nil {
		return err
	}
	return s.announce(ctx, true, s.file("peer.txt", []byte("a file of the peer's\n"), 0o644, s.nextVersion()))
}

// Names with terminal escape sequences, announced by modes.
const (
	escName    = "a\x1b[31mred"    // pulled, then replaced (versioning keeps the old one)
	escRefused = "b\x1b[2Jrefused" // announced, never served: its pull fails
)

// modes announces mode.bin with mode 0o7777 and escName, waits for the
// node to have pulled both, then announces a new version of escName and
// escRefused, whose blocks it refuses to serve.
func modes(ctx context.Context, cfg *config, id *crypt.Identity, out *output) error {
	s, err := connect(ctx, cfg, id, out)
	if err != nil {
		return err
	}
	defer s.linger(ctx)
	if err := s.sendClusterConfig(ctx, folderEntry{}); err != nil {
		return err
	}
	s.mu.Lock()
	s.refuse[escRefused] = true
	s.mu.Unlock()
	err = s.announce(ctx, true,
		s.file("mode.bin", []byte("#!/bin/sh\necho setuid and world-writable\n"), 0o7777, s.nextVersion()),
		s.file(escName, []byte("first version\n"), 0o644, s.nextVersion()))
	if err != nil {
		return err
	}
	if err := s.waitFiles(ctx, "mode.bin", escName); err != nil {
		return err
	}
	return s.announce(ctx, false,
		s.file(escName, []byte("second version, longer\n"), 0o644, s.nextVersion()),
		s.file(escRefused, []byte("never served\n"), 0o644, s.nextVersion()))
}
