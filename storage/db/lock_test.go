package db

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The test binary re-executes itself as a second lockstep process. These
// variables tell the child what to do; without them the helper test skips.
const (
	helperModeEnv = "LOCKSTEP_DB_HELPER_MODE" // "locked", "open" or "hold"
	helperPathEnv = "LOCKSTEP_DB_HELPER_PATH"
)

// TestHelperProcess is not a test: it is the body of the child process.
func TestHelperProcess(t *testing.T) {
	mode, path := os.Getenv(helperModeEnv), os.Getenv(helperPathEnv)
	if mode == "" {
		t.Skip("runs only as a child of the lock tests")
	}
	switch mode {
	case "locked":
		db, err := Open(path)
		if err == nil {
			db.Close()
			t.Fatal("Open succeeded while another process holds the database")
		}
		if !errors.Is(err, ErrLocked) {
			t.Fatalf("Open: %v, want ErrLocked", err)
		}
		fmt.Println("error:", err)
	case "open":
		db, err := Open(path)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		if err := db.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
	case "hold":
		db, err := Open(path)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		fmt.Println("ready")
		io.Copy(io.Discard, os.Stdin) // until the parent kills us
		db.Close()
	default:
		t.Fatalf("unknown helper mode %q", mode)
	}
}

// helper returns a command that runs TestHelperProcess in a new process.
func helper(mode, path string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperModeEnv+"="+mode, helperPathEnv+"="+path)
	return cmd
}

func TestLockedAcrossProcesses(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lockstep.db")
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	out, err := helper("locked", path).CombinedOutput()
	if err != nil {
		t.Fatalf("child refused to see ErrLocked: %v\n%s", err, out)
	}
	want := fmt.Sprintf("database is in use by another lockstep process (pid %d)", os.Getpid())
	if !strings.Contains(string(out), want) {
		t.Errorf("child's error does not say %q:\n%s", want, out)
	}

	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if out, err := helper("open", path).CombinedOutput(); err != nil {
		t.Fatalf("child could not open after Close: %v\n%s", err, out)
	}
	// And the parent can open again after the child closed.
	db, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
}

func TestLockDiesWithProcess(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lockstep.db")
	cmd := helper("hold", path)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "ready\n" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("child did not get ready: %q, %v", line, err)
	}

	_, err = Open(path)
	if !errors.Is(err, ErrLocked) {
		t.Errorf("Open while the child holds the database: %v, want ErrLocked", err)
	} else if want := "(pid " + strconv.Itoa(cmd.Process.Pid) + ")"; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not name the child, %s", err, want)
	}

	// A crash (SIGKILL, no Close) must not leave a stale lock.
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	db, err := Open(path)
	if err != nil {
		t.Fatalf("Open after the holder died: %v", err)
	}
	db.Close()
}

func TestLockedWithoutPID(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.lock")
	l, err := acquireLock(path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.release()
	// A holder that never wrote its pid (or wrote garbage) still locks.
	if err := os.WriteFile(path, []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = acquireLock(path)
	if err != ErrLocked {
		t.Fatalf("acquireLock: %v, want exactly ErrLocked", err)
	}
}

func TestParseLockPID(t *testing.T) {
	for _, c := range []struct {
		in  string
		pid int
		ok  bool
	}{
		{"", 0, false},
		{"\n", 0, false},
		{"0", 0, false},
		{"1", 1, true},
		{"42\n", 42, true},
		{" 42 \n", 42, true},
		{"-1", 0, false},
		{"+1", 0, false},
		{"4 2", 0, false},
		{"12x", 0, false},
		{"2147483647", 2147483647, true}, // max int32
		{"2147483648", 0, false},         // max int32 + 1
		{"99999999999", 0, false},        // 11 digits
		{"0000000001", 1, true},          // 10 digits
		{"1\x00", 0, false},
	} {
		pid, ok := parseLockPID([]byte(c.in))
		if pid != c.pid || ok != c.ok {
			t.Errorf("parseLockPID(%q) = %d, %v; want %d, %v", c.in, pid, ok, c.pid, c.ok)
		}
	}
}

func FuzzParseLockPID(f *testing.F) {
	for _, s := range []string{"", "1", "42\n", " 7 ", "-1", "2147483648", "abc", "\x00"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		pid, ok := parseLockPID(b)
		if !ok {
			if pid != 0 {
				t.Fatalf("not ok but pid %d", pid)
			}
			return
		}
		if pid <= 0 {
			t.Fatalf("ok with pid %d", pid)
		}
		// What we write, we read back.
		again, ok := parseLockPID([]byte(strconv.Itoa(pid) + "\n"))
		if !ok || again != pid {
			t.Fatalf("round trip of %d: %d, %v", pid, again, ok)
		}
	})
}
