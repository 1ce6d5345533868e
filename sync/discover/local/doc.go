// Package local finds devices on the local network: a Service announces
// this device's ID and addresses by UDP broadcast (IPv4) and multicast
// (IPv6, group ff12::8384), and remembers the announcements it hears.
//
// Invariants:
//   - A datagram is [uint32 big-endian Magic][protobuf Announce] of at most
//     MaxPacketSize bytes, with a 32-byte device ID, at most MaxAddresses
//     addresses of at most MaxAddressLen bytes each (local.proto is the
//     specification). Anything else is dropped with a Debug log and changes
//     nothing; no input makes the decoder panic.
//   - Only addresses discover.ParseAddress accepts (tcp:// and relay://
//     URLs) are kept, in its canonical form. An unspecified host (0.0.0.0,
//     :: or empty) in a tcp:// address becomes the datagram's source IP,
//     loopback hosts are kept only from a loopback source, and a
//     link-local IPv6 host always carries the zone it was heard on.
//   - Our own announcements are ignored. An address is forgotten 3 ×
//     Interval after it was last heard; a device that restarts (a new
//     instance ID) replaces its addresses.
//   - Memory is bounded: at most maxDevices devices and maxKnownAddresses
//     addresses per device are remembered.
//   - A port that cannot be bound never stops Serve: it logs one Warn and
//     keeps announcing. A send error logs at most one Warn per distinct
//     text per hour.
//   - Goroutines run only inside Serve and have all ended when it returns.
//     New binds nothing. Lookup, Devices, Announce and Addr are safe for
//     concurrent use with each other and with Serve.
package local
