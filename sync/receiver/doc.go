// Package receiver is the untrusted side of lockstep: a node holding
// folders of type encrypted. It never has a folder key. It stores the
// sealed records devices send it (in the database) and the sealed chunks
// they reference (in a blob.Store), keeps one record log per folder, and
// serves records, chunks and the folder key envelope to every device the
// folder is shared with, trusted devices and other receivers alike.
//
// The sync engine owns the connections and hands everything about
// encrypted folders to a *Receiver: the peer's ClusterConfig entries,
// SealedIndex and SealedAck messages and Requests. For each (connection,
// folder) the Receiver runs an ingester, which stores what the peer sends,
// and a log sender, which sends the peer the folder's log; both end with
// the connection's context.
//
// Invariants:
//
//   - A record is stored only once every chunk it references is stored,
//     and each chunk only after a durability barrier (blob.Batcher.Sync, or
//     a plain Put). A chunk a peer cannot deliver makes the records needing
//     it skipped, never stored half.
//   - A sealed chunk shorter than the pack threshold (128 KiB) is stored
//     in a pack with the other small chunks of its fetch (package pack; at
//     most about 16 MiB each), and its row names the pack and its offset;
//     a longer one is a blob of its own. On a remote store
//     (SetRemoteStore: S3, where every object costs a request) the
//     threshold is 1 MiB and packs are about 2 MiB, at most a few filled
//     or written at once; chunks are served from packs read whole, and a
//     pack's bytes never change under its key. A pack describes itself (its
//     trailer), so Rebuild and the tail replay need no database. A pack no
//     row uses is deleted by a prune only past the grace period and never
//     while an ingest of this process has it pending; one whose rows hold
//     less than half its size is repacked (new pack synced, rows moved in
//     one transaction, old pack deleted), so a crash leaves at worst a
//     pack no row uses.
//   - An ingest that fails for a reason of this node's own (the store or
//     the database: a full disk, a bucket out of reach) keeps the message
//     unacknowledged and tries it again, after 1 s doubling to 1 min with
//     jitter, until it is stored or the connection ends; meanwhile Status
//     returns the failure (StoreError). The peer, which keeps at most a
//     few messages unacknowledged, waits and resumes by itself. A failure
//     of the peer's (a chunk request it failed, its connection) ends the
//     connection's ingest.
//   - Each (origin, counter) is stored at most once per folder; repeats
//     are dropped, so any number of peers may send the same records.
//   - Log sequences of a folder start at 1 and increase with the order of
//     appends; they are never reused, even after a prune dropped the
//     highest. Appends to one folder are serialised. Each append's records
//     are written to the store as one log object, keyed by the first
//     sequence, before the database commit; so the store alone holds
//     everything needed to rebuild the database (Rebuild). A prune
//     rewrites the objects holding records it drops (same key; deleted
//     when empty), so a log object's sequences increase strictly, the
//     first at least its key's.
//   - Prune (retention, then garbage collection) holds the folder's append
//     lock. A chunk a kept record references is never deleted; a chunk's
//     blob goes before its row. The highest log sequence and the highest
//     counter per origin announced never go down: pruning raises
//     high-water marks kept in the database and the meta object, and a
//     pruned (origin, counter) is not stored again.
//   - Serve removes the temporary files crashed writes left in the store
//     (when it can: local.Store) at start and hourly, only those last
//     written over an hour ago, so no write in progress loses its own.
//   - A chunk is checked only for its size (> 0 and at most
//     crypt.MaxSealedChunkSize): without the key nothing else can be.
//   - Check compares a folder's store with its database under the
//     folder's append lock, so no append, prune or collection makes it
//     report something missing: one listing merged in key order with the
//     rows (reading pack indexes, log objects, envelope and meta, never a
//     chunk body), in memory bounded whatever the folder's size. Objects
//     no row needs and temporary files are problems only past a grace
//     period (an hour by default), so a write in progress is none.
//   - A peer gets data only of folders this node holds as encrypted and
//     shares with it.
//
// Store layout (fk is the folder's segment, recorded in the database: the
// hex of the folder ID's bytes, or, for a folder first loaded with a store
// key and opaqueNew (SetStoreKey), crypt.StoreKey.Segment of its ID, whose
// meta object is sealed with the key and whose log objects name no folder):
//
//	r/<fk>/meta.json                  folder, devices, log ID, retention, high-water marks (JSON)
//	r/<fk>/c/<chunk id hex>           a sealed chunk body of 128 KiB or more
//	r/<fk>/p/<pack id, 32 hex>        a pack of smaller sealed chunk bodies (package pack)
//	r/<fk>/log/<first seq, 16 hex>    protobuf SealedIndex of one append
//	r/<fk>/envelope/<gen, 16 hex>     the folder key envelope, per generation
package receiver
