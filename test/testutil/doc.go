// Package testutil holds the waits and fakes that the tests of several
// lockstep packages share, so that each is written, and fixed, once.
//
// It imports no lockstep package: any package's tests, and the test support
// packages beside them, can use it without an import cycle. Everything in it
// is safe for concurrent use unless its comment says otherwise.
package testutil
