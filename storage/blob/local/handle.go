package local

import (
	"io"
	"sync"
)

// handles is a cache of open files or directories by name, safe for
// concurrent use. A handle handed out is counted while in use: one that
// leaves the cache (replaced, forgotten, evicted, or at close) closes once
// its last user is done, never under a user.
type handles[T io.Closer] struct {
	mu     sync.Mutex
	m      map[string]*handle[T]
	max    int
	closed bool // nothing more is cached
}

// handle is one entry of a handles cache.
type handle[T io.Closer] struct {
	v       T
	users   int
	closing bool // out of the cache, or never in it
}

func newHandles[T io.Closer](max int) *handles[T] {
	return &handles[T]{m: make(map[string]*handle[T]), max: max}
}

// get returns the cached handle of name if current accepts it, with the
// function to call when done with it; one current refuses leaves the
// cache.
func (c *handles[T]) get(name string, current func(T) bool) (v T, done func(), ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h := c.m[name]
	if h == nil {
		return v, nil, false
	}
	if !current(h.v) {
		c.retire(name, h)
		return v, nil, false
	}
	h.users++
	return h.v, func() { c.done(h) }, true
}

// add caches v as name in place of any handle there, unless keep is false,
// the cache is closed or it is full of handles in use (then v closes when
// its user is done), and returns the function to call when done with it.
func (c *handles[T]) add(name string, v T, keep bool) (done func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h := &handle[T]{v: v, users: 1, closing: true}
	if old := c.m[name]; old != nil {
		c.retire(name, old)
	}
	if len(c.m) >= c.max {
		for k, o := range c.m {
			if o.users == 0 {
				c.retire(k, o)
			}
		}
	}
	if keep && !c.closed && len(c.m) < c.max {
		h.closing = false
		c.m[name] = h
	}
	return func() { c.done(h) }
}

// forget lets go of the handle of name, if any.
func (c *handles[T]) forget(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if h := c.m[name]; h != nil {
		c.retire(name, h)
	}
}

// close lets go of every handle and caches no more.
func (c *handles[T]) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	for k, h := range c.m {
		c.retire(k, h)
	}
}

// done ends one use of h.
func (c *handles[T]) done(h *handle[T]) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h.users--
	if h.users == 0 && h.closing {
		h.v.Close()
	}
}

// retire takes h, cached as name, out of the cache. Called with mu.
func (c *handles[T]) retire(name string, h *handle[T]) {
	delete(c.m, name)
	h.closing = true
	if h.users == 0 {
		h.v.Close()
	}
}
