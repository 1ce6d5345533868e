package local

import "io"

// handle is an open file or directory that one of the store's caches
// keeps, with its users: one taken out of its cache closes once its last
// user is done, never under a user. Its methods are called with the
// cache's lock held.
type handle[T io.Closer] struct {
	v       T
	users   int
	closing bool // out of the cache, or never in it
}

// done ends one use.
func (h *handle[T]) done() {
	h.users--
	if h.users == 0 && h.closing {
		h.v.Close()
	}
}

// retire marks h out of its cache.
func (h *handle[T]) retire() {
	h.closing = true
	if h.users == 0 {
		h.v.Close()
	}
}
