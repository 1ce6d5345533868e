package crypt

import (
	"errors"
	"runtime"
	"sync/atomic"
	"testing"
)

type countingObserver struct{ started, done atomic.Int32 }

func (o *countingObserver) KDFStarted() { o.started.Add(1) }
func (o *countingObserver) KDFDone()    { o.done.Add(1) }

// Every scrypt call, sealing or opening, right or wrong password, is
// shown to the observer, once, as started and done.
func TestKDFObserved(t *testing.T) {
	o := &countingObserver{}
	ObserveKDF(o)
	defer ObserveKDF(nil)
	key := FolderKey{7}
	env, err := sealEnvelope(key, []byte("pw"), testLogN, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := openEnvelope(env, []byte("pw"), testMaxLogN); err != nil {
		t.Fatal(err)
	}
	if _, err := openEnvelope(env, []byte("wrong"), testMaxLogN); !errors.Is(err, ErrWrongPassword) {
		t.Fatalf("wrong password: %v", err)
	}
	// No scrypt: an empty password is refused first.
	if _, err := openEnvelope(env, nil, testMaxLogN); err == nil {
		t.Fatal("empty password opened the envelope")
	}
	if s, d := o.started.Load(), o.done.Load(); s != 3 || d != 3 {
		t.Errorf("observer saw %d starts and %d ends, want 3 and 3", s, d)
	}
}

// scrypt's work area goes back to the system as the call returns: Go
// would keep the freed 256 MiB for minutes.
func TestKDFReturnsWorkArea(t *testing.T) {
	if testing.Short() {
		t.Skip("a full scrypt takes about a second")
	}
	if _, err := SealEnvelope(FolderKey{8}, []byte("pw")); err != nil {
		t.Fatal(err)
	}
	// A collection now frees the work area if nothing did; only a return
	// to the system takes it off the idle heap.
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	if kept := ms.HeapIdle - ms.HeapReleased; kept > 64<<20 {
		t.Errorf("%d MiB of freed heap kept after scrypt, want it returned", kept>>20)
	}
}
