package relay

import (
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"net/netip"
	"time"

	"lockstep/crypt"
)

// session is a key handed out by Connect, waiting for its two halves.
// Fields other than done are guarded by Server.mu.
type session struct {
	key     [keySize]byte
	created time.Time
	expires time.Time
	first   *net.TCPConn  // the half that arrived first, waiting; nil before
	second  *net.TCPConn  // the half that arrived second, once splicing
	taken   bool          // the second half arrived and is splicing
	done    chan struct{} // closed when the splice has ended, or the session was dropped unspliced
	// devices are the requester and the target, counted in
	// Server.perDevice, and src the requester's source, counted in
	// Server.sessionsPerSource, until the session ends.
	devices []crypt.DeviceID
	src     netip.Prefix
	ended   bool
}

// newSession makes a session for a Connect from one device, at the source
// src, to target, or says why not. Another session may be ended to make
// room (limits.go); limited says the per-source limits refused this one
// or ended another.
func (s *Server) newSession(from, target crypt.DeviceID, src netip.Prefix) (key [keySize]byte, reg *registration, code Response_Code, limited, dropped bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	reg = s.regs[target]
	if reg == nil {
		return key, nil, Response_NOT_REGISTERED, false, false
	}
	now := time.Now()
	for k, p := range s.sessions {
		if p.first == nil && now.After(p.expires) {
			delete(s.sessions, k) // nobody ever joined
			s.endLocked(p)
		}
	}
	if s.perDevice[from] >= s.maxPerDevice || s.perDevice[target] >= s.maxPerDevice {
		return key, nil, Response_TOO_MANY_SESSIONS, false, false
	}
	if s.sessionsPerSource[src] >= s.maxSessionsPerSource {
		return key, nil, Response_TOO_MANY_SESSIONS, true, false
	}
	if len(s.sessions)+len(s.live) >= s.max {
		victim := s.sessionVictimLocked(s.sessionsPerSource[src])
		if victim == nil {
			return key, nil, Response_TOO_MANY_SESSIONS, true, false
		}
		s.dropLocked(victim)
		dropped = true
	}
	rand.Read(key[:])
	p := &session{key: key, created: now, expires: now.Add(s.keyTTL), done: make(chan struct{}), devices: []crypt.DeviceID{from}, src: src}
	if target != from {
		p.devices = append(p.devices, target)
	}
	for _, d := range p.devices {
		s.perDevice[d]++
	}
	s.sessionsPerSource[src]++
	s.sessions[key] = p
	return key, reg, Response_OK, dropped, dropped
}

// endLocked stops counting p against its devices and source; it does so
// once per session, with s.mu held.
func (s *Server) endLocked(p *session) {
	if p.ended {
		return
	}
	p.ended = true
	for _, d := range p.devices {
		if s.perDevice[d]--; s.perDevice[d] <= 0 {
			delete(s.perDevice, d)
		}
	}
	if s.sessionsPerSource[p.src]--; s.sessionsPerSource[p.src] <= 0 {
		delete(s.sessionsPerSource, p.src)
	}
	delete(s.live, p)
}

// dropLocked ends p to make room for another session: a spliced one has
// its connections closed (its splice then ends as usual), one not spliced
// yet is forgotten and its waiting half, if any, let go. s.mu is held.
func (s *Server) dropLocked(p *session) {
	s.endLocked(p)
	if p.taken {
		p.first.Close()
		p.second.Close()
		return
	}
	delete(s.sessions, p.key)
	close(p.done)
}

// dropSession forgets a session nobody has joined yet.
func (s *Server) dropSession(key [keySize]byte) {
	s.mu.Lock()
	if p := s.sessions[key]; p != nil && p.first == nil {
		delete(s.sessions, key)
		s.endLocked(p)
	}
	s.mu.Unlock()
}

// serveJoin reads the rest of a session join and either waits for the
// partner or splices with the one already waiting. c is closed by the
// caller when serveJoin returns.
func (s *Server) serveJoin(ctx context.Context, c *net.TCPConn, first byte) {
	var buf [joinSize]byte
	buf[0] = first
	if _, err := io.ReadFull(c, buf[1:]); err != nil {
		s.log.Debug("relay: short session join", "remote", c.RemoteAddr(), "err", err)
		return
	}
	if string(buf[:len(sessionMagic)]) != sessionMagic {
		s.log.Debug("relay: not a session join", "remote", c.RemoteAddr())
		return
	}
	key := [keySize]byte(buf[len(sessionMagic):])
	c.SetDeadline(time.Time{})

	s.mu.Lock()
	p := s.sessions[key]
	if p == nil || p.taken || time.Now().After(p.expires) {
		s.mu.Unlock()
		s.log.Debug("relay: unknown, used or expired session key", "remote", c.RemoteAddr())
		return
	}
	if p.first == nil {
		p.first = c
		s.mu.Unlock()
		s.awaitPartner(ctx, key, p)
		return
	}
	p.taken = true
	p.second = c
	delete(s.sessions, key)
	s.live[p] = struct{}{}
	s.mu.Unlock()

	s.splice(p.first, c)

	s.mu.Lock()
	s.endLocked(p)
	s.mu.Unlock()
	close(p.done)
}

// awaitPartner keeps the first half of session p until the second half has
// spliced it, or the key expires, or the server shuts down.
func (s *Server) awaitPartner(ctx context.Context, key [keySize]byte, p *session) {
	t := time.NewTimer(time.Until(p.expires))
	defer t.Stop()
	select {
	case <-p.done:
		return
	case <-t.C:
	case <-ctx.Done():
	}
	s.mu.Lock()
	if !p.taken {
		delete(s.sessions, key)
		s.endLocked(p)
		s.mu.Unlock()
		if ctx.Err() == nil {
			s.log.Debug("relay: session partner never joined", "remote", p.first.RemoteAddr())
			p.first.SetWriteDeadline(time.Now().Add(writeTimeout))
			p.first.Write([]byte{JoinTimedOut})
		}
		return
	}
	s.mu.Unlock()
	<-p.done // the splice ends: shutdown closes its connections
}

// splice tells both halves to go and copies bytes both ways until both
// directions have ended.
func (s *Server) splice(a, b *net.TCPConn) {
	for _, c := range []*net.TCPConn{a, b} {
		c.SetWriteDeadline(time.Now().Add(writeTimeout))
		if _, err := c.Write([]byte{JoinOK}); err != nil {
			s.log.Debug("relay: session half gone before splicing", "remote", c.RemoteAddr(), "err", err)
			return
		}
		c.SetWriteDeadline(time.Time{})
	}
	s.log.Debug("relay: splicing", "a", a.RemoteAddr(), "b", b.RemoteAddr())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.pipe(b, a)
	}()
	s.pipe(a, b)
	<-done
}

// pipeChunk is how many bytes pipe copies between updates of the counter.
const pipeChunk = 1 << 20

// pipe copies src to dst (with splice(2) where the OS has it) until src
// ends, then half-closes dst. Any other failure closes both connections, so
// that the other direction ends too.
func (s *Server) pipe(dst, src *net.TCPConn) {
	for {
		// A session ends when a direction carries nothing for spliceIdle.
		// The deadline bounds each piece, which may take longer than that
		// to fill: a piece cut short by it after moving some bytes only
		// shows the direction is alive but slow.
		src.SetReadDeadline(time.Now().Add(s.spliceIdle))
		n, err := io.CopyN(dst, src, pipeChunk)
		s.bytes.Add(n)
		var ne net.Error
		switch {
		case err == nil:
			continue
		case errors.Is(err, io.EOF):
			dst.CloseWrite()
			return
		case n > 0 && errors.As(err, &ne) && ne.Timeout():
			continue
		}
		dst.Close()
		src.Close()
		return
	}
}
