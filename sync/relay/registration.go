package relay

import (
	"crypto/tls"
	"fmt"
	"net"
	"sync"
	"time"

	"lockstep/crypt"
)

// registration is a device's kept protocol connection. Writes come from the
// registration's own goroutines and from Connect handlers, so they are
// serialized; a failed write closes the connection.
type registration struct {
	id  crypt.DeviceID
	raw *net.TCPConn
	tc  *tls.Conn
	wmu sync.Mutex
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
	r := &registration{id: peer, raw: raw, tc: tc}
	s.mu.Lock()
	old := s.regs[peer]
	if old == nil && len(s.regs) >= s.maxRegs {
		s.mu.Unlock()
		s.log.Debug("relay: registration refused, relay full", "device", peer.Short())
		r.write(responseMessage(Response_UNAVAILABLE, "the relay has all the registrations it takes"))
		return
	}
	s.regs[peer] = r
	s.mu.Unlock()
	if old != nil {
		s.log.Debug("relay: registration replaced", "device", peer.Short())
		old.raw.Close()
	}
	defer func() {
		s.mu.Lock()
		if s.regs[peer] == r {
			delete(s.regs, peer)
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
