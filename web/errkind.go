package web

import (
	"errors"

	"lockstep/crypt"
	"lockstep/sync/backup"
)

// verificationErrors are the sentinels that mean something failed
// verification rather than failed to work: what a script must tell apart
// from an ordinary error (the CLI exits 4 on them).
var verificationErrors = []error{
	crypt.ErrWrongPassword, // also restore.ErrWrongPassword, which wraps it
	crypt.ErrAuth,
	crypt.ErrChunkID,
	crypt.ErrEnvelope,
	backup.ErrRollback,
	backup.ErrFalseClaim,
	backup.ErrUntrustedClaims,
}

// VerificationFailed reports whether err (or, for an echo.HTTPError, the
// error it was made from) means a wrong password, tampered or damaged
// data, or a receiver that rolled back.
func VerificationFailed(err error) bool {
	for _, target := range verificationErrors {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}
