package relay

import (
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"time"

	"lockstep/crypt"
)

// session is a key handed out by Connect, waiting for its two halves.
// Fields other than done are guarded by Server.mu.
type session struct {
	expires time.Time
	first   *net.TCPConn  // the half that arrived first, waiting; nil before
	taken   bool          // the second half arrived and is splicing
	done    chan struct{} // closed when the splice has ended
	// devices are the requester and the target, counted in
	// Server.perDevice until the session ends.
	devices []crypt.DeviceID
}

// newSession makes a session for a Connect from one device to target, or
// says why not.
func (s *Server) newSession(from, target crypt.DeviceID) ([keySize]byte, *registration, Response_Code) {
	var key [keySize]byte
	s.mu.Lock()
	defer s.mu.Unlock()
	reg := s.regs[target]
	if reg == nil {
		return key, nil, Response_NOT_REGISTERED
	}
	now := time.Now()
	for k, p := range s.sessions {
		if p.first == nil && now.After(p.expires) {
			delete(s.sessions, k) // nobody ever joined
			s.endLocked(p)
		}
	}
	if len(s.sessions)+s.spliced >= s.max || s.perDevice[from] >= s.maxPerDevice || s.perDevice[target] >= s.maxPerDevice {
		return key, nil, Response_TOO_MANY_SESSIONS
	}
	rand.Read(key[:])
	p := &session{expires: now.Add(s.keyTTL), done: make(chan struct{}), devices: []crypt.DeviceID{from}}
	if target != from {
		p.devices = append(p.devices, target)
	}
	for _, d := range p.devices {
		s.perDevice[d]++
	}
	s.sessions[key] = p
	return key, reg, Response_OK
}

// endLocked stops counting p against its devices; it runs once per
// session, with s.mu held.
func (s *Server) endLocked(p *session) {
	for _, d := range p.devices {
		if s.perDevice[d]--; s.perDevice[d] <= 0 {
			delete(s.perDevice, d)
		}
	}
	p.devices = nil
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
	delete(s.sessions, key)
	s.spliced++
	s.mu.Unlock()

	s.splice(p.first, c)

	s.mu.Lock()
	s.spliced--
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
