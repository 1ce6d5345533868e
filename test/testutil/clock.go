package testutil

import (
	"sync"
	"time"
)

// Clock is a time source that moves only when a test moves it. Its Now
// method value serves where a component takes a `Now func() time.Time`.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a Clock standing at a fixed instant in UTC, the same on
// every run so that times in failure messages compare run to run.
func NewClock() *Clock {
	return &Clock{now: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)}
}

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Set moves the clock to t, backwards as well as forwards.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// Add moves the clock by d.
func (c *Clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}
