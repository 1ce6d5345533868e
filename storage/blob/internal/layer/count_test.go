package layer

import (
	"bytes"
	"io"
	"strings"
	"testing"
)

func TestCountKeepsSeeking(t *testing.T) {
	c := Count(bytes.NewReader([]byte("hello")))
	s, ok := c.(io.Seeker)
	if !ok {
		t.Fatal("a count of a bytes.Reader is no io.Seeker")
	}
	if b, _ := io.ReadAll(c); string(b) != "hello" {
		t.Fatalf("read %q", b)
	}
	if _, err := s.Seek(1, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	if b, _ := io.ReadAll(c); string(b) != "ello" {
		t.Fatalf("read %q after seeking to 1", b)
	}
	if c.Count() != 9 {
		t.Fatalf("counted %d bytes, want the 9 moved", c.Count())
	}
	if _, ok := Count(strings.NewReader("x")).(io.Seeker); !ok {
		t.Fatal("a count of a strings.Reader is no io.Seeker")
	}
	if _, ok := Count(io.MultiReader(strings.NewReader("x"))).(io.Seeker); ok {
		t.Fatal("a count of a reader that can't seek claims it can")
	}
}
