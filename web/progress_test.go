package web

import (
	"testing"
	"time"
)

// TestProgressRate: the rate is the bytes done since the transfer was
// first seen over the time since; the time left is what remains at that
// rate; a new total or bytes going back start the measure again.
func TestProgressRate(t *testing.T) {
	at := time.Date(2026, 12, 4, 3, 30, 1, 0, time.UTC)
	p := progress{now: func() time.Time { return at }}
	if r, l := p.observe("f", 100, 1100); r != 0 || l != 0 {
		t.Fatalf("first look: %v, %v", r, l)
	}
	at = at.Add(500 * time.Millisecond)
	if r, _ := p.observe("f", 150, 1100); r != 0 {
		t.Fatalf("half a second in: rate %v, want none yet", r)
	}
	at = at.Add(1500 * time.Millisecond)
	r, l := p.observe("f", 300, 1100)
	if r != 100 || l != 8*time.Second {
		t.Fatalf("200 bytes in 2 s, 800 left: %v B/s, %v left", r, l)
	}
	// Another pull: a new total.
	if r, _ := p.observe("f", 0, 50); r != 0 {
		t.Fatalf("a new transfer has rate %v", r)
	}
	at = at.Add(2 * time.Second)
	if r, l := p.observe("f", 10, 50); r != 5 || l != 8*time.Second {
		t.Fatalf("new transfer: %v, %v", r, l)
	}
	p.forget(map[string]bool{})
	if len(p.seen) != 0 {
		t.Fatalf("forget kept %v", p.seen)
	}
}
