package local

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"lockstep/crypt"
	"lockstep/test/testutil"
)

func TestSendErrorsWarnOncePerText(t *testing.T) {
	logs := &testutil.LogRecorder{}
	s := mustNew(t, Config{ID: randomID(t), Addresses: fixed("tcp://:1"), Targets: []string{"127.0.0.1:9", "[::1]:9"}, Logger: slog.New(logs)})
	// Sockets that were closed: every send fails, with one text per target.
	snd := s.openSenders()
	snd.close()
	const msg = "sending local announcement failed"
	s.send(context.Background(), snd)
	if n := logs.Count(slog.LevelWarn, msg); n != 2 {
		t.Fatalf("first round: %d Warn lines, want one per target", n)
	}
	s.send(context.Background(), snd)
	s.send(context.Background(), snd)
	if w, d := logs.Count(slog.LevelWarn, msg), logs.Count(slog.LevelDebug, msg); w != 2 || d != 4 {
		t.Fatalf("after three rounds: %d Warn and %d Debug lines, want 2 and 4", w, d)
	}
}

func TestWarningsPerHour(t *testing.T) {
	w := newWarnings()
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	steps := []struct {
		text string
		at   time.Duration
		want bool
	}{
		{"a", 0, true},
		{"a", time.Minute, false},
		{"b", time.Minute, true},
		{"a", time.Hour - time.Nanosecond, false},
		{"a", time.Hour, true},
		{"b", time.Hour + time.Minute - time.Nanosecond, false},
		{"b", time.Hour + time.Minute, true},
	}
	for _, st := range steps {
		if got := w.warn(st.text, t0.Add(st.at)); got != st.want {
			t.Fatalf("warn(%q, +%v) = %v, want %v", st.text, st.at, got, st.want)
		}
	}
}

func TestDeviceLimit(t *testing.T) {
	clk := testutil.NewClock()
	s := mustNew(t, Config{ID: randomID(t), Addresses: fixed(), Interval: time.Minute, Now: clk.Now})
	add := func(id crypt.DeviceID) bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		fresh, _ := s.record(id, 1, []string{"tcp://192.0.2.1:1"}, clk.Now())
		return fresh
	}
	for range maxDevices {
		if !add(randomID(t)) {
			t.Fatal("a device below the limit was dropped")
		}
	}
	if add(randomID(t)) || len(s.Devices()) != maxDevices {
		t.Fatal("a device beyond the limit was kept")
	}
	clk.Add(3 * time.Minute)
	if !add(randomID(t)) || len(s.Devices()) != 1 {
		t.Fatalf("expired devices were not pruned: %d", len(s.Devices()))
	}
}

func TestAddressLimitPerDevice(t *testing.T) {
	clk := testutil.NewClock()
	s := mustNew(t, Config{ID: randomID(t), Addresses: fixed(), Interval: time.Hour, Now: clk.Now})
	id := randomID(t)
	for i := range maxKnownAddresses + 1 {
		clk.Add(time.Second)
		s.mu.Lock()
		s.record(id, 1, []string{fmt.Sprintf("tcp://192.0.2.1:%d", i+1)}, clk.Now())
		s.mu.Unlock()
	}
	got := s.Lookup(id)
	if len(got) != maxKnownAddresses || slices.Contains(got, "tcp://192.0.2.1:1") || !slices.Contains(got, "tcp://192.0.2.1:33") {
		t.Fatalf("kept %d addresses: %q", len(got), got)
	}
}
