// Package global is lockstep's global discovery: an HTTPS service that maps
// device IDs to the addresses those devices announce, and the client a node
// runs to announce itself and look others up. Any node can run the Server
// (`lockstep serve --discovery`), so a user's own receiver is their private
// discovery service; nothing public is used by default.
//
// # Wire protocol (version 1)
//
// Transport: HTTP/1.1 over TLS 1.3. The server presents its device
// certificate; the client pins the server's device ID taken from the
// service URL (https://HOST:PORT/?id=ID). The server requires a client
// certificate of any device: the client's device ID is the hash of that
// certificate's key, and that is the only authentication there is. Both
// sides negotiate ALPN "http/1.1".
//
// Announce: `POST /` with a JSON body
//
//	{"addresses": ["tcp://0.0.0.0:22100", "relay://HOST:PORT/?id=RELAYID"]}
//
// of at most MaxBodySize bytes, carrying at most MaxAddresses addresses of at
// most MaxAddressLen bytes each. Every address is one discover.ParseAddress
// accepts: a tcp://HOST:PORT URL (no path, query, user or fragment) or a
// relay://HOST:PORT/?id=DEVICEID URL (exactly that query, a valid non-zero
// device ID and a host that is not unspecified), printable ASCII with the
// scheme in lower case, HOST an IP address or a DNS name; ports are
// 1-65535. In a tcp:// address an unspecified host (empty, 0.0.0.0 or ::)
// means "the address this request came from" and the server replaces it with
// the request's source IP; a loopback tcp:// address is dropped unless the
// request came from loopback; everything else is stored as given, duplicates
// once. The addresses replace whatever the device announced before; an
// empty list forgets the device. Unknown JSON fields are ignored. Answers:
//
//   - 204 with header `Reannounce-After: SECONDS` (a third of the server's
//     TTL): stored, and it lives for the TTL after the announcement.
//   - 403 `{"error": "a device can only announce its own addresses"}` when
//     the body carries `"device": "ID"` naming another device than the
//     certificate's; nothing is stored.
//   - 400 `{"error": "..."}` for a body that is too large, not JSON, lacks
//     "addresses", or breaks a rule above; nothing is stored.
//   - 429 `{"error": "..."}` when the device is new (or announces from
//     another source than before) and its source, the request's IPv4
//     address or IPv6 /64, holds MaxPerSource live devices already; an
//     entry the device had stays as it was.
//   - 503 `{"error": "..."}` when the server already holds MaxDevices live
//     devices, this one is new, and no source holds more than one device
//     more than this one's would. When one does, the oldest device of the
//     source holding the most is forgotten to make room.
//
// Look up: `GET /?device=ID` answers 200
// `{"addresses": [...], "seen": "RFC3339"}` for a live entry, 404
// `{"error": "device not found"}` for none, 400 for a malformed ID.
//
// Invariants:
//   - A device's entry is only ever written by a request authenticated with
//     that device's certificate (and dropped, besides by expiry, only to
//     make room as above).
//   - No source holds more than MaxPerSource live devices, and none can
//     keep the devices of sources holding fewer out.
//   - Nothing malformed is stored: every stored address passed the rules
//     above, and a request breaking any of them changes nothing.
//   - An entry is never served at or after announcement time + TTL (expiry
//     is checked on every lookup, and expired entries are swept every TTL/2).
//   - Server and Client start no goroutine outside their Serve methods, and
//     none outlives Serve; the Client keeps no idle connections, so the
//     connection goroutines of net/http end with each request.
package global
