package testutil

import (
	"sync"
	"testing"
	"time"
)

func TestClockMovesOnlyWhenMoved(t *testing.T) {
	c := NewClock()
	t0 := c.Now()
	if !t0.Equal(NewClock().Now()) || t0.Location() != time.UTC {
		t.Fatalf("a new clock stands at %v, another at %v", t0, NewClock().Now())
	}
	time.Sleep(2 * time.Millisecond) // real time passes; the clock must not
	if !c.Now().Equal(t0) {
		t.Fatalf("the clock moved by itself: %v to %v", t0, c.Now())
	}
	c.Add(time.Hour)
	if got := c.Now(); !got.Equal(t0.Add(time.Hour)) {
		t.Errorf("after Add(1h): %v, want %v", got, t0.Add(time.Hour))
	}
	back := t0.Add(-time.Nanosecond)
	c.Set(back)
	if got := c.Now(); !got.Equal(back) {
		t.Errorf("after Set: %v, want %v", got, back)
	}
}

func TestClockConcurrentUse(t *testing.T) {
	c := NewClock()
	t0 := c.Now()
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				c.Add(time.Second)
				_ = c.Now()
			}
		})
	}
	wg.Wait()
	if got := c.Now().Sub(t0); got != 800*time.Second {
		t.Errorf("800 concurrent Adds of 1s moved the clock %v", got)
	}
}
