package main

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"lockstep/sync/restore"
)

// openPTY opens a pseudo-terminal: what a program writes to tty, the test
// reads from master, a raw non-blocking descriptor (readSome polls it: a
// deadline on an *os.File of it was not always honoured, and a test hung).
func openPTY(t *testing.T) (master int, tty *os.File) {
	t.Helper()
	fd, err := syscall.Open("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	var unlock int32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), syscall.TIOCSPTLCK, uintptr(unsafe.Pointer(&unlock))); e != 0 {
		t.Fatal(e)
	}
	var n uint32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), syscall.TIOCGPTN, uintptr(unsafe.Pointer(&n))); e != 0 {
		t.Fatal(e)
	}
	tty, err = os.OpenFile("/dev/pts/"+strconv.Itoa(int(n)), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tty.Close() })
	return fd, tty
}

// readSome reads what the terminal shows within d.
func readSome(t *testing.T, master int, d time.Duration) string {
	t.Helper()
	var sb strings.Builder
	buf := make([]byte, 4096)
	for end := time.Now().Add(d); time.Now().Before(end); {
		n, err := syscall.Read(master, buf)
		switch {
		case n > 0:
			sb.Write(buf[:n])
		case err == syscall.EAGAIN || err == syscall.EINTR:
			time.Sleep(5 * time.Millisecond)
		case err != nil:
			t.Fatal(err)
		default:
			return sb.String() // EOF
		}
	}
	return sb.String()
}

// TestProgressOnTerminal: on a terminal, progress is a bar redrawn in
// place, and a wait without a measure shows the time so far, then clears
// its line.
func TestProgressOnTerminal(t *testing.T) {
	master, tty := openPTY(t)
	if !isTerminal(tty) {
		t.Fatal("a pseudo-terminal is not taken for a terminal")
	}
	pp := newProgressPrinter(tty, "restoring", "docs")
	pp.print(restore.Progress{Files: 1, FilesTotal: 4, Bytes: 1 << 20, BytesTotal: 4 << 20})
	pp.print(restore.Progress{Files: 4, FilesTotal: 4, Bytes: 4 << 20, BytesTotal: 4 << 20})
	pp.end()
	got := readSome(t, master, 200*time.Millisecond)
	for _, want := range []string{"\r[#####...............] restoring docs: 1/4 files", "\r[####################] restoring docs: 4/4 files"} {
		if !strings.Contains(got, want) {
			t.Errorf("the terminal shows %q; want %q in it", got, want)
		}
	}

	stop := waiting(tty, "sharing docs")
	time.Sleep(250 * time.Millisecond)
	stop()
	got = readSome(t, master, 200*time.Millisecond)
	if !strings.Contains(got, "sharing docs 0.") || strings.Contains(got, "\n") || !strings.HasSuffix(got, "\r\x1b[K") {
		t.Errorf("waiting on a terminal showed %q; want the time redrawn on one line, cleared at the end", got)
	}
}

// TestProgressPlain: off a terminal, progress lines are plain: no bar, no
// carriage return.
func TestProgressPlain(t *testing.T) {
	var b strings.Builder
	pp := newProgressPrinter(&b, "recovering", "docs")
	pp.print(restore.Progress{Files: 1, FilesTotal: 2, Bytes: 10, BytesTotal: 20})
	pp.print(restore.Progress{Files: 2, FilesTotal: 2, Bytes: 20, BytesTotal: 20})
	pp.end()
	if got := b.String(); strings.ContainsAny(got, "\r[") || !strings.HasSuffix(got, "recovering docs: 2/2 files, 0.0/0.0 MiB (100%)\n") {
		t.Errorf("plain progress: %q", got)
	}
}
