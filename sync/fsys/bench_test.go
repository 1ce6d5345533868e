package fsys

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func BenchmarkValidName(b *testing.B) {
	name := "Documents/Projects/lockstep/sync/fsys/some file name.go"
	b.SetBytes(int64(len(name)))
	for b.Loop() {
		if err := ValidName(name); err != nil {
			b.Fatal(err)
		}
	}
}

// deepDir creates a directory depth levels deep and returns its name.
func deepDir(b *testing.B, dir string, depth int) string {
	name := strings.TrimSuffix(strings.Repeat("d/", depth), "/")
	if err := os.MkdirAll(filepath.Join(dir, name), 0o755); err != nil {
		b.Fatal(err)
	}
	return name
}

// BenchmarkPullFile is the write path of one small pulled file: CreateTemp,
// Write, Chmod, Rename, then Remove (so that no rename replaces a file,
// which ext4 turns into a data flush); fsync excluded. The /os variants do the
// same on a bare os.Root, without this package's checks.
// BenchmarkModeTime is a pulled file's mode and time set by name, as
// Chmod and Chtimes do, against through the open file (SetModeTime).
func BenchmarkModeTime(b *testing.B) {
	mtime := time.Unix(1700000000, 5)
	for _, how := range []string{"by-name", "open-file"} {
		b.Run(how, func(b *testing.B) {
			r, dir := openRoot(b)
			name := deepDir(b, dir, 2) + "/file"
			f, tmp, err := r.CreateTemp(name)
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			for b.Loop() {
				if how == "open-file" {
					if !SetModeTime(f, 0o644, mtime) {
						b.Skip("not on this system")
					}
					continue
				}
				if err := r.Chmod(tmp, 0o644); err != nil {
					b.Fatal(err)
				}
				if err := r.Chtimes(tmp, mtime); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkPullFile(b *testing.B) {
	data := []byte("hello world")
	for _, depth := range []int{1, 8} {
		b.Run(fmt.Sprintf("depth=%d", depth), func(b *testing.B) {
			r, dir := openRoot(b)
			name := deepDir(b, dir, depth) + "/file"
			for b.Loop() {
				f, tmp, err := r.CreateTemp(name)
				if err != nil {
					b.Fatal(err)
				}
				f.Write(data)
				f.Close()
				if err := r.Chmod(tmp, 0o644); err != nil {
					b.Fatal(err)
				}
				if err := r.Rename(tmp, name); err != nil {
					b.Fatal(err)
				}
				if err := r.Remove(name); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("depth=%d", depth)+"/os", func(b *testing.B) {
			r, dir := openRoot(b)
			name := deepDir(b, dir, depth) + "/file"
			tmp := name + ".tmp"
			for b.Loop() {
				f, err := r.root.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
				if err != nil {
					b.Fatal(err)
				}
				f.Write(data)
				f.Close()
				if err := r.root.Chmod(tmp, 0o644); err != nil {
					b.Fatal(err)
				}
				if err := r.root.Rename(tmp, name); err != nil {
					b.Fatal(err)
				}
				if err := r.root.Remove(name); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkOpen opens a file for reading, as a peer's block request or the
// scanner does: /beneath with the one-call open, /careful without it.
func BenchmarkOpen(b *testing.B) {
	for _, depth := range []int{1, 8} {
		for _, fast := range []bool{true, false} {
			name := map[bool]string{true: "beneath", false: "careful"}[fast]
			b.Run(fmt.Sprintf("depth=%d/%s", depth, name), func(b *testing.B) {
				r, dir := openRoot(b)
				file := deepDir(b, dir, depth) + "/file"
				writeOS(b, filepath.Join(dir, file), "x")
				if !fast {
					r.dir = nil
				}
				for b.Loop() {
					f, err := r.Open(file)
					if err != nil {
						b.Fatal(err)
					}
					f.Close()
				}
			})
		}
	}
}
