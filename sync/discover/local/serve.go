package local

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// Serve binds the receive sockets, announces at once and then every
// Interval (and soon after Announce, or after hearing a device that is new
// or restarted), and records what it hears, until ctx ends; it then
// returns nil, with every goroutine it started ended and every socket
// closed. A port that cannot be bound is logged once and Serve keeps
// announcing. It returns ErrRunning if the Service is already serving.
func (s *Service) Serve(ctx context.Context) error {
	var inst [8]byte
	rand.Read(inst[:]) // never fails
	s.mu.Lock()
	if s.running {
		s.mu.Unlock()
		return ErrRunning
	}
	s.running = true
	s.instance = int64(binary.BigEndian.Uint64(inst[:]) | 1)
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.running, s.addr = false, nil
		s.mu.Unlock()
	}()
	select {
	case <-s.trigger: // Serve announces at start anyway
	default:
	}

	recv, group := s.bind(ctx)
	snd := s.openSenders()
	var wg sync.WaitGroup
	for _, c := range recv {
		wg.Go(func() { s.receive(c) })
	}
	s.announceLoop(ctx, snd, group)
	for _, c := range recv {
		c.Close()
	}
	snd.close()
	wg.Wait()
	return nil
}

// bind opens the receive sockets, logging one Warn if any cannot be bound.
// group is the socket to join to the multicast group, or nil.
func (s *Service) bind(ctx context.Context) (recv []*net.UDPConn, group *net.UDPConn) {
	lc := net.ListenConfig{Control: reuseAddr}
	type want struct{ network, addr string }
	var wants []want
	if s.cfg.Listen == "" {
		p := strconv.Itoa(DefaultPort)
		wants = []want{{"udp4", ":" + p}, {"udp6", "[::]:" + p}}
	} else {
		network := "udp4"
		if host, _, _ := net.SplitHostPort(s.cfg.Listen); host != "" {
			if ip, err := netip.ParseAddr(host); err == nil && ip.Is6() && !ip.Is4In6() {
				network = "udp6"
			}
		}
		wants = []want{{network, s.cfg.Listen}}
	}
	var errs []error
	for _, w := range wants {
		pc, err := lc.ListenPacket(ctx, w.network, w.addr)
		if err != nil {
			if w.network == "udp6" && s.cfg.Listen == "" && noIPv6(err) {
				s.log.Debug("no IPv6; not receiving multicast announcements", "err", err)
				continue
			}
			errs = append(errs, err)
			continue
		}
		c := pc.(*net.UDPConn)
		recv = append(recv, c)
		if s.cfg.Listen == "" && w.network == "udp6" {
			group = c
		}
	}
	if len(errs) > 0 {
		s.log.Warn("local discovery cannot receive announcements; still announcing", "err", errors.Join(errs...))
	}
	if len(recv) > 0 {
		s.mu.Lock()
		s.addr = recv[0].LocalAddr()
		s.mu.Unlock()
		s.log.Debug("local discovery listening", "addr", recv[0].LocalAddr())
	}
	return recv, group
}

// noIPv6 reports whether err says the host has no IPv6.
func noIPv6(err error) bool {
	return errors.Is(err, syscall.EAFNOSUPPORT) || errors.Is(err, syscall.EADDRNOTAVAIL) || errors.Is(err, syscall.EPROTONOSUPPORT)
}

// receive handles datagrams from c until c is closed.
func (s *Service) receive(c *net.UDPConn) {
	buf := make([]byte, MaxPacketSize+1) // a longer datagram reads as MaxPacketSize+1 bytes
	for {
		n, src, err := c.ReadFromUDPAddrPort(buf)
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			s.log.Debug("reading announcement", "err", err)
			time.Sleep(10 * time.Millisecond) // a persistent error must not spin
			continue
		}
		s.handle(buf[:n], src.Addr())
	}
}

// handle records one datagram heard from src.
func (s *Service) handle(b []byte, src netip.Addr) {
	a, err := ParseAnnouncement(b)
	if err != nil {
		s.log.Debug("dropping announcement", "from", src, "err", err)
		return
	}
	if a.ID == s.cfg.ID {
		return
	}
	addrs := make([]string, 0, len(a.Addresses))
	for _, raw := range a.Addresses {
		if r, ok := resolve(raw, src); ok {
			addrs = append(addrs, r)
		}
	}
	if len(addrs) == 0 {
		s.log.Debug("dropping announcement without usable addresses", "from", src, "device", a.ID)
		return
	}
	s.mu.Lock()
	fresh, changed := s.record(a.ID, a.InstanceID, addrs, s.cfg.Now())
	s.mu.Unlock()
	if fresh {
		s.log.Debug("device heard", "device", a.ID, "from", src, "addresses", addrs)
		s.Announce()
	}
	if changed && s.cfg.OnChange != nil {
		s.cfg.OnChange(a.ID)
	}
}

// announceLoop sends an announcement at once, then every Interval and
// soon after each Announce, until ctx ends. Announcements asked for by
// Announce are at least minAnswerGap apart.
func (s *Service) announceLoop(ctx context.Context, snd *senders, group *net.UDPConn) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	var last time.Time
	next := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.trigger:
			if at := last.Add(minAnswerGap); at.Before(next) {
				next = at
				timer.Reset(time.Until(next))
			}
		case <-timer.C:
			if group != nil {
				s.joinGroups(group)
			}
			s.send(ctx, snd)
			last = time.Now()
			next = last.Add(s.cfg.Interval)
			timer.Reset(s.cfg.Interval)
			s.mu.Lock()
			s.prune(s.cfg.Now().Add(-s.expiry()))
			s.mu.Unlock()
		}
	}
}

// joinGroups joins the multicast group on every up multicast interface
// (again: interfaces may have appeared since the last time).
func (s *Service) joinGroups(c *net.UDPConn) {
	ifs, err := multicastInterfaces()
	if err != nil {
		s.sendFailed(err)
		return
	}
	for _, ifi := range ifs {
		if err := joinGroup(c, multicastGroup, &ifi); err != nil {
			s.log.Debug("joining multicast group", "interface", ifi.Name, "err", err)
		}
	}
}

// send sends one announcement to every target.
func (s *Service) send(ctx context.Context, snd *senders) {
	pkt, err := s.packet()
	if err != nil {
		s.sendFailed(err)
		return
	}
	targets, err := s.targets(ctx)
	if err != nil {
		s.sendFailed(err)
	}
	for _, t := range targets {
		if err := snd.send(pkt, t); err != nil {
			s.sendFailed(err)
		}
	}
}

// packet encodes the current announcement: the valid addresses among
// cfg.Addresses(), as many as fit.
func (s *Service) packet() ([]byte, error) {
	s.mu.Lock()
	a := Announcement{ID: s.cfg.ID, InstanceID: s.instance}
	s.mu.Unlock()
	for _, addr := range s.cfg.Addresses() {
		if err := ValidAddress(addr); err != nil {
			s.log.Debug("not announcing address", "err", err)
			continue
		}
		a.Addresses = append(a.Addresses, addr)
	}
	if len(a.Addresses) > MaxAddresses {
		s.log.Debug("announcing only the first addresses", "have", len(a.Addresses), "limit", MaxAddresses)
		a.Addresses = a.Addresses[:MaxAddresses]
	}
	for {
		pkt, err := a.MarshalBinary()
		if errors.Is(err, ErrTooLarge) && len(a.Addresses) > 0 {
			a.Addresses = a.Addresses[:len(a.Addresses)-1]
			continue
		}
		return pkt, err
	}
}

// targets returns where announcements go now.
func (s *Service) targets(ctx context.Context) ([]netip.AddrPort, error) {
	if len(s.cfg.Targets) == 0 {
		return defaultTargets(s.port)
	}
	var out []netip.AddrPort
	var errs []error
	for _, t := range s.cfg.Targets {
		aps, err := resolveTarget(ctx, t)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, aps...)
	}
	return out, errors.Join(errs...)
}

// sendFailed logs a send error: a Warn the first time its text is seen in
// an hour, else Debug.
func (s *Service) sendFailed(err error) {
	if s.warnings.warn(err.Error(), s.cfg.Now()) {
		s.log.Warn("sending local announcement failed", "err", err)
		return
	}
	s.log.Debug("sending local announcement failed", "err", err)
}

// senders are the unbound sockets announcements are sent from.
type senders struct {
	v4, v6 *net.UDPConn // nil where the family is unavailable
	err4   error        // why v4 is nil
	err6   error        // why v6 is nil
}

func (s *Service) openSenders() *senders {
	snd := &senders{}
	snd.v4, snd.err4 = net.ListenUDP("udp4", nil)
	snd.v6, snd.err6 = net.ListenUDP("udp6", nil)
	if snd.err4 != nil {
		s.sendFailed(fmt.Errorf("opening IPv4 socket: %w", snd.err4))
	}
	if snd.err6 != nil {
		s.log.Debug("opening IPv6 socket", "err", snd.err6)
	}
	return snd
}

// send writes pkt to t from the socket of t's family.
func (snd *senders) send(pkt []byte, t netip.AddrPort) error {
	c, err := snd.v4, snd.err4
	if t.Addr().Is6() {
		c, err = snd.v6, snd.err6
	}
	if c == nil {
		return fmt.Errorf("sending to %v: %w", t, err)
	}
	if _, err := c.WriteToUDPAddrPort(pkt, t); err != nil {
		return err
	}
	return nil
}

func (snd *senders) close() {
	for _, c := range []*net.UDPConn{snd.v4, snd.v6} {
		if c != nil {
			c.Close()
		}
	}
}
