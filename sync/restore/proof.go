package restore

import "lockstep/sync/sealed"

// Proof is what the newest checkpoint of one origin proves of the log a
// recovery read (sealed.Proof).
type Proof = sealed.Proof
