package retry

import (
	"errors"
	"io"
	"sync"
)

// errAttemptOver is what a reader of an attempt that is over returns.
var errAttemptOver = errors.New("blob write attempt is over")

// body makes the reader given to a write replayable for retries: by
// seeking back if it is an io.Seeker, else by keeping the first bytes read
// up to a bound. Each attempt reads through its own attemptReader; only
// the current attempt's reader reads, so a transport still reading an
// abandoned attempt's body cannot steal bytes from the next one.
type body struct {
	mu     sync.Mutex
	r      io.Reader
	seeker io.Seeker // nil: replay from buf
	start  int64     // where the seeker was at first
	buf    []byte    // the bytes read so far, while not overflowed
	max    int64     // the bound of buf
	over   bool      // more than max bytes were read: buf is gone
	err    error     // the caller's reader failed (not io.EOF)
	gen    int       // the current attempt; 0 before the first
}

func newBody(r io.Reader, max int64) *body {
	b := &body{r: r, max: max}
	if sk, ok := r.(io.Seeker); ok {
		if pos, err := sk.Seek(0, io.SeekCurrent); err == nil {
			b.seeker, b.start = sk, pos
		}
	}
	return b
}

// replayable reports whether a new attempt could read the data again.
func (b *body) replayable() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err == nil && (b.seeker != nil || !b.over)
}

// attempt ends the current attempt and returns a reader for a new one, or
// false if the data cannot be read again.
func (b *body) attempt() (io.Reader, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err != nil || b.seeker == nil && b.over {
		return nil, false
	}
	if b.gen > 0 && b.seeker != nil {
		if _, err := b.seeker.Seek(b.start, io.SeekStart); err != nil {
			return nil, false
		}
	}
	b.gen++
	a := &attemptReader{b: b, gen: b.gen}
	if b.seeker != nil {
		return seekingAttempt{a}, true
	}
	return a, true
}

// close ends the last attempt: the caller has its reader back.
func (b *body) close() {
	b.mu.Lock()
	b.gen++
	b.mu.Unlock()
}

type attemptReader struct {
	b   *body
	gen int
	pos int64 // bytes this attempt has read
}

func (a *attemptReader) Read(p []byte) (int, error) {
	b := a.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if a.gen != b.gen {
		return 0, errAttemptOver
	}
	if b.seeker == nil && a.pos < int64(len(b.buf)) {
		n := copy(p, b.buf[a.pos:])
		a.pos += int64(n)
		return n, nil
	}
	n, err := b.r.Read(p)
	a.pos += int64(n)
	if b.seeker == nil && !b.over {
		if int64(len(b.buf)+n) <= b.max {
			b.buf = append(b.buf, p[:n]...)
		} else {
			b.over, b.buf = true, nil
		}
	}
	if err != nil && err != io.EOF {
		b.err = err
	}
	return n, err
}

// seekingAttempt is an attempt's reader of a body that can seek, and seeks
// too, within the body (offsets count from where it began): a store under
// the retry layer can then read the body twice, as S3's checksum does,
// without a copy.
type seekingAttempt struct{ *attemptReader }

// Unwrap implements blob.BodyWrapper: the caller's body, under the
// attempt. (Only for a body that seeks: one kept for replay must be read
// through the attempt.)
func (a seekingAttempt) Unwrap() io.Reader { return a.b.r }

func (a seekingAttempt) Seek(off int64, whence int) (int64, error) {
	b := a.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if a.gen != b.gen {
		return 0, errAttemptOver
	}
	if whence == io.SeekStart {
		if off < 0 {
			return 0, errors.New("seek before the start of the body")
		}
		off += b.start
	}
	n, err := b.seeker.Seek(off, whence)
	if err == nil && n < b.start {
		// Back where the body began, and an error: the caller asked for
		// bytes before it.
		n, err = b.seeker.Seek(b.start, io.SeekStart)
		if err == nil {
			err = errors.New("seek before the start of the body")
		}
	}
	return n - b.start, err
}
