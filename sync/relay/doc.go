// Package relay splices two devices' connections through a third machine
// when they can't reach each other. TLS between the devices stays end to
// end: the relay only ever sees the ciphertext of their own TLS session.
//
// A Server runs the relay. A Client keeps a device registered with a relay,
// so that the device is reachable at the relay's URL
// (relay://HOST:PORT/?id=RELAYDEVICEID); Dial reaches a registered device
// through such a URL. Both hand the caller a raw net.Conn spliced to the
// other device, on which the caller runs its own TLS handshake (the dialer
// as TLS client, the registered device as TLS server).
//
// # Wire contract
//
// One TCP port serves two kinds of connection, told apart by their first
// byte: 0x16 (a TLS handshake record) starts a protocol connection, anything
// else a session connection.
//
// Protocol connections are TLS 1.3 with ALPN "lockstep-relay/1". The relay
// presents its device certificate; the client pins the relay's device ID
// from the URL and presents its own certificate, so the relay knows which
// device it talks to. Messages are frames of a 4-byte big-endian length L
// (at most MaxFrameSize, 1024) followed by L bytes of a Message from
// relay.proto. The client's first message is Join or Connect:
//
//   - Join: the relay answers Response{OK} and keeps the connection as that
//     device's registration; a newer Join by the same device replaces (and
//     closes) the older one. Each side sends a Ping every 60 s and answers
//     Ping with Pong; a side that has received nothing for 3 minutes drops
//     the registration (the client then registers again).
//   - Connect{device}: the relay answers Response{NOT_REGISTERED} when device
//     has no registration, Response{TOO_MANY_SESSIONS} at its session limit,
//     or else creates a session: a random 32-byte key, sent as
//     Invitation{from: requester, key} on the target's registration and as
//     Invitation{from: target, key} to the requester, which then closes the
//     connection.
//
// Session connections are plain TCP. Each side sends the 8 bytes "LSRELAY1"
// and the 32-byte key. When both halves have arrived the relay answers each
// with one byte, 0, and from then on copies bytes both ways until both
// directions have ended; a side that closes its write half has that
// half-close passed on to the other side. A key is good once, for 30 s
// after the relay made it: an unknown, expired or reused key gets its
// connection closed without an answer; a half whose partner has not arrived
// when the key expires gets the byte 1 (JoinTimedOut) and is closed.
//
// Time limits: a connection has 10 s to finish its TLS handshake and send
// its first message, or to send its whole session join; a registration
// write that blocks for 10 s ends the registration; a spliced session in
// which one direction carries nothing for 5 minutes is ended (devices ping
// more often than that).
//
// Limits: at most MaxSessions sessions, MaxSessionsPerDevice of them with
// one device as requester or target, and DefaultMaxSessionsPerSource asked
// for from one source, an IPv4 address or IPv6 /64 (a Connect beyond
// these is answered Response{TOO_MANY_SESSIONS}); MaxRegistrations
// registered devices, DefaultMaxRegistrationsPerSource of them from one
// source (a Join beyond these is answered Response{UNAVAILABLE}). When the
// relay is full, a newcomer takes the place of the oldest session (which
// is cut) or registration (whose connection is closed) of the source
// holding the most, if that source holds more than the newcomer's would
// (limits.go); otherwise it is refused.
//
// # Invariants
//
//   - Everything a peer sends is untrusted: frames are size-limited and
//     validated, and a malformed frame or join closes that connection only,
//     with a Debug log. Session keys are never logged.
//   - The relay never holds more than MaxSessions sessions (pending and
//     spliced together) nor MaxRegistrations registrations, and no source
//     more than its share of either; no source can keep those of sources
//     holding fewer out. Lines about refusals and drops by these limits
//     come at most once a minute.
//   - No goroutine started by Server.Serve or Client.Serve outlives it, and
//     Dial starts none that outlives the call. Nothing else starts goroutines.
package relay
