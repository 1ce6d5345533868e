// Package protocol is the wire protocol between two trusted lockstep
// devices over an authenticated TLS 1.3 connection: the messages (generated
// from lockstep.proto, which is the specification), their framing, and a
// Conn that multiplexes them.
//
// Invariants:
//   - A frame is [uint32 big-endian L][type][flags][L-2 bytes body] with
//     2 <= L <= MaxFrameSize; a compressed body never decompresses beyond
//     MaxFrameSize. Anything else read from a peer is an error wrapping
//     ErrMalformed, and the connection ends. No input makes the reader
//     panic, and a frame's buffer grows only as its bytes arrive.
//   - A body is counted before it is decoded: an Index or IndexUpdate of
//     more than MaxIndexFiles files, a SealedIndex of more than
//     MaxSealedRecords records, or a body of more elements (messages at any
//     depth, repeated fields' elements) than MaxElements (Index,
//     IndexUpdate, SealedIndex) or MaxOtherElements (the rest) is
//     malformed, so decoding one frame holds at most about 250 MiB.
//     BatchFiles cuts batches within these limits.
//   - Nothing is sent that the receiver would reject: WriteMessage checks
//     messages against the same rules before writing.
//   - A Conn hands ClusterConfig, Index, IndexUpdate and the optional
//     messages (SealedIndex, SealedAck, ReceiverClaims) to its Model one at
//     a time, in the peer's order; requests are answered concurrently, at
//     most Options.MaxIncomingRequests at once; each Request gets exactly
//     the Response with its ID.
//   - No goroutine started by Serve (or ExchangeHello) outlives it, and
//     Model.Closed is called exactly once per Serve, last.
//
// The package never imports the rest of lockstep: it defines the Model it
// needs, and device IDs are plain 32-byte arrays.
package protocol
