package relay

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	"lockstep/crypt"
	"lockstep/sync/discover"
)

// registration is a device's kept protocol connection. Writes come from the
// registration's own goroutines and from Connect handlers, so they are
// serialized; a failed write closes the connection.
type registration struct {
	id    crypt.DeviceID
	raw   *net.TCPConn
	tc    *tls.Conn
	src   netip.Prefix // the source it counts against
	since time.Time    // when it was made
	wmu   sync.Mutex
}

// write sends m within writeTimeout, closing the connection on failure.
func (r *registration) write(m *Message) error {
	r.wmu.Lock()
	defer r.wmu.Unlock()
	r.raw.SetWriteDeadline(time.Now().Add(writeTimeout))
	err := writeMessage(r.tc, m)
	if err != nil {
		r.raw.Close()
	}
	return err
}

// serveRegistration keeps peer's registration until the connection fails,
// is silent for s.idle, breaks the protocol or is replaced.
func (s *Server) serveRegistration(raw *net.TCPConn, tc *tls.Conn, peer crypt.DeviceID) {
	r := &registration{id: peer, raw: raw, tc: tc, src: discover.SourceOf(raw.RemoteAddr()), since: time.Now()}
	old, dropped, refusal := s.register(r)
	if refusal != "" {
		s.noteLimit(false)
		s.log.Debug("relay: registration refused", "device", peer.Short(), "reason", refusal)
		r.write(responseMessage(Response_UNAVAILABLE, refusal))
		return
	}
	if old != nil {
		s.log.Debug("relay: registration replaced", "device", peer.Short())
		old.raw.Close()
	}
	if dropped != nil {
		s.noteLimit(true)
		s.log.Debug("relay: registration dropped to make room", "device", dropped.id.Short(), "for", peer.Short())
		dropped.raw.Close()
	}
	defer func() {
		s.mu.Lock()
		if s.regs[peer] == r {
			s.unregisterLocked(r)
		}
		s.mu.Unlock()
	}()
	raw.SetDeadline(time.Time{})
	if err := r.write(responseMessage(Response_OK, "")); err != nil {
		return
	}
	s.log.Debug("relay: device registered", "device", peer.Short(), "remote", raw.RemoteAddr())

	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(s.pingEvery)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				if r.write(pingMessage()) != nil {
					return
				}
			}
		}
	}()
	defer func() {
		close(stop)
		wg.Wait()
	}()

	for {
		raw.SetReadDeadline(time.Now().Add(s.idle))
		m, err := readMessage(tc)
		if err != nil {
			s.log.Debug("relay: registration ended", "device", peer.Short(), "err", err)
			return
		}
		switch b := m.GetBody().(type) {
		case *Message_Ping:
			if r.write(pongMessage()) != nil {
				return
			}
		case *Message_Pong:
		default:
			s.log.Debug("relay: unexpected message on a registration", "device", peer.Short(), "type", fmt.Sprintf("%T", b))
			return
		}
	}
}

// register makes r its device's registration, within the limits: it
// returns the registration r replaces and one dropped to make room (the
// caller closes them), or why r is refused.
func (s *Server) register(r *registration) (old, dropped *registration, refusal string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old = s.regs[r.id]
	if (old == nil || old.src != r.src) && s.regsPerSource[r.src] >= s.maxRegsPerSource {
		return nil, nil, "too many devices registered from this address"
	}
	if old == nil && len(s.regs) >= s.maxRegs {
		if dropped = s.regVictimLocked(s.regsPerSource[r.src]); dropped == nil {
			return nil, nil, "the relay has all the registrations it takes"
		}
		s.unregisterLocked(dropped)
	}
	if old != nil {
		s.unregisterLocked(old)
	}
	s.regs[r.id] = r
	s.regsPerSource[r.src]++
	return old, dropped, ""
}

// unregisterLocked forgets r, its device's registration. s.mu is held.
func (s *Server) unregisterLocked(r *registration) {
	delete(s.regs, r.id)
	if s.regsPerSource[r.src]--; s.regsPerSource[r.src] <= 0 {
		delete(s.regsPerSource, r.src)
	}
}

// noteLimit counts a registration or session refused (dropped false) or
// dropped to make room by the limits, logging at most one line per
// logEvery about them.
func (s *Server) noteLimit(dropped bool) {
	if ok, refusedN, droppedN := s.limitLog.note(time.Now(), dropped); ok {
		s.log.Info("relay at its limits", "refused", refusedN, "dropped", droppedN)
	}
}
