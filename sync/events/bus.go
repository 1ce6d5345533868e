package events

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// DefaultSize is how many recent events a Bus made with size 0 keeps.
const DefaultSize = 1000

// ErrFellBehind is Since's answer to a reader whose next event is no longer
// held: the ring dropped it, or the reader's ID is not from this bus (a
// previous run of the node). The reader missed events; it should reload
// whatever it keeps and go on from Latest.
var ErrFellBehind = errors.New("events were missed")

// Bus keeps the last events published, for readers to take at their own
// pace. Safe for concurrent use. A nil *Bus is a bus nobody reads: Publish
// drops the event, Since finds none, Wait waits for its context; so a
// package can take a *Bus before the node gives it one.
type Bus struct {
	mu sync.Mutex
	// ring holds the newest events; the event with ID i is at i % len(ring).
	ring []Event
	// held is how many events ring holds: IDs last-held+1 to last.
	held int
	// last is the ID of the newest event, or the start before any.
	last int64
	// wake is closed, and replaced, by each Publish: it wakes every Wait.
	wake chan struct{}
	now  func() time.Time
}

// NewBus returns a Bus that keeps the newest size events (DefaultSize for
// size <= 0). The first event's ID is one more than the current time in
// microseconds since 1970: a reader's ID from an earlier run of the node
// is then lower than any of this run's (while the node publishes fewer
// than a million events a second), and IDs stay below 2^53, exact in
// JavaScript.
func NewBus(size int) *Bus {
	return newBus(size, time.Now)
}

func newBus(size int, now func() time.Time) *Bus {
	if size <= 0 {
		size = DefaultSize
	}
	return &Bus{ring: make([]Event, size), last: now().UnixMicro(), wake: make(chan struct{}), now: now}
}

// Publish adds an event with payload p. It never waits for readers, only
// for other publishers' few instructions; the event replaces the oldest
// once the ring is full.
func (b *Bus) Publish(p Payload) {
	if b == nil || p == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.last++
	b.ring[b.last%int64(len(b.ring))] = Event{ID: b.last, Time: b.now(), Type: p.Type(), Data: p}
	if b.held < len(b.ring) {
		b.held++
	}
	close(b.wake)
	b.wake = make(chan struct{})
}

// Latest returns the ID of the newest event: a reader that starts from it
// gets only events published after this call. Before any event it is an ID
// no event has.
func (b *Bus) Latest() int64 {
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.last
}

// Since returns the events after the ID after, oldest first: none when
// after is the latest. after 0 asks for every event held. When the event
// after it is no longer held, or after is not an ID of this bus, it returns
// an error matching ErrFellBehind. The events are the reader's own copy.
func (b *Bus) Since(after int64) ([]Event, error) {
	if b == nil {
		return nil, nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	oldest := b.last - int64(b.held) + 1
	if after == 0 {
		after = oldest - 1
	}
	if after < oldest-1 || after > b.last {
		return nil, fmt.Errorf("events after %d asked for, the oldest held is %d: %w", after, oldest, ErrFellBehind)
	}
	n := b.last - after
	if n == 0 {
		return nil, nil
	}
	out := make([]Event, 0, n)
	for id := after + 1; id <= b.last; id++ {
		out = append(out, b.ring[id%int64(len(b.ring))])
	}
	return out, nil
}

// Wait returns nil once Since(after) has something to say (events, or
// ErrFellBehind), at once if it has already; or ctx's error when ctx ends
// first.
func (b *Bus) Wait(ctx context.Context, after int64) error {
	if b == nil {
		<-ctx.Done()
		return ctx.Err()
	}
	b.mu.Lock()
	wake := b.wake
	ready := after != b.last
	if after == 0 {
		ready = b.held > 0
	}
	b.mu.Unlock()
	if ready {
		return nil
	}
	select {
	case <-wake:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
