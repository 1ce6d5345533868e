package blobtest

import (
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	"lockstep/storage/blob"
)

// listKeySet mixes keys whose order differs from a directory walk's ('-' and
// '.' sort before '/'), directories that share names with file-system
// sharding schemes, and nesting.
var listKeySet = []string{
	"a-b", "a.c", "a/b", "a0", "ab/x", "abcdef",
	"b/abc", "b/abce", "b/ab-d", "b/ab/xy", "b/abcdef", "b/ab/abcd", "b/zy",
	"c/d/e/f", "z", "zzzzzz",
}

func testList(t *testing.T, s blob.Store) {
	if got := listKeys(t, s, ""); len(got) != 0 {
		t.Fatalf("List of an empty store = %q", got)
	}
	// Put in an order unrelated to the sorted one.
	for i, k := range listKeySet {
		put(t, s, k, data(uint64(i), i*7))
	}
	sorted := slices.Clone(listKeySet)
	slices.Sort(sorted)
	for _, prefix := range []string{
		"", "a", "a/", "ab", "ab/", "abc", "abcdef", "b/", "b/ab", "b/ab/", "b/ab/a",
		"b/abc", "b/z", "c/", "c/d/", "c/d/e/f", "c/d/e/f/", "nothing", "nothing/", "zz", "zzzzzzz",
	} {
		want := []string{}
		for _, k := range sorted {
			if strings.HasPrefix(k, prefix) {
				want = append(want, k)
			}
		}
		if got := listKeys(t, s, prefix); !slices.Equal(got, want) {
			t.Errorf("List(%q)\n got %q\nwant %q", prefix, got, want)
		}
	}
	for i, k := range listKeySet {
		checkBlob(t, s, k, data(uint64(i), i*7))
	}
	for _, prefix := range []string{"A", "../", "/a", "a//", ".x", "a/.b", "a b"} {
		err := s.List(t.Context(), prefix, func(blob.Info) error { return nil })
		if !errors.Is(err, blob.ErrInvalidKey) {
			t.Errorf("List(%q) = %v, want ErrInvalidKey", prefix, err)
		}
	}
}

func testListStop(t *testing.T, s blob.Store) {
	for i := range 5 {
		put(t, s, "s/"+string(rune('a'+i)), nil)
	}
	errStop := errors.New("stop here")
	for _, stopAt := range []int{1, 2, 5} {
		calls := 0
		err := s.List(t.Context(), "s/", func(blob.Info) error {
			calls++
			if calls == stopAt {
				return errStop
			}
			return nil
		})
		if !errors.Is(err, errStop) || calls != stopAt {
			t.Fatalf("List stopping at %d: err %v after %d calls", stopAt, err, calls)
		}
	}
}

// testListDelete deletes each blob from inside List's fn, the way a garbage
// collector does.
func testListDelete(t *testing.T, s blob.Store) {
	for i := range 20 {
		put(t, s, "g/"+string(rune('a'+i))+"xyz", data(uint64(i), 10))
	}
	put(t, s, "keep", nil)
	n := 0
	err := s.List(t.Context(), "g/", func(info blob.Info) error {
		n++
		return s.Delete(t.Context(), info.Key)
	})
	if err != nil || n != 20 {
		t.Fatalf("List deleting = %v after %d calls, want nil after 20", err, n)
	}
	if got := listKeys(t, s, ""); !slices.Equal(got, []string{"keep"}) {
		t.Fatalf("List after deleting = %q", got)
	}
}

var invalidKeys = []string{
	"", "../x", "/x", "x/", "a//b", "A", "a/B", ".x", "a/.x", "a/..", ".", "..",
	"a b", "a\x00b", "a\\b", "ä", "a/b\n", strings.Repeat("a", 1025),
}

func testInvalidKeys(t *testing.T, s blob.Store) {
	ctx := t.Context()
	for _, key := range invalidKeys {
		if err := blob.ValidKey(key); !errors.Is(err, blob.ErrInvalidKey) {
			t.Errorf("ValidKey(%q) = %v, want ErrInvalidKey", key, err)
		}
		if err := s.Put(ctx, key, strings.NewReader("x"), 1); !errors.Is(err, blob.ErrInvalidKey) {
			t.Errorf("Put(%q) = %v, want ErrInvalidKey", key, err)
		}
		called := false
		err := s.Get(ctx, key, func(io.Reader) error { called = true; return nil })
		if !errors.Is(err, blob.ErrInvalidKey) || called {
			t.Errorf("Get(%q) = %v (fn called: %v), want ErrInvalidKey", key, err, called)
		}
		if _, err := s.Stat(ctx, key); !errors.Is(err, blob.ErrInvalidKey) {
			t.Errorf("Stat(%q) = %v, want ErrInvalidKey", key, err)
		}
		if err := s.Delete(ctx, key); !errors.Is(err, blob.ErrInvalidKey) {
			t.Errorf("Delete(%q) = %v, want ErrInvalidKey", key, err)
		}
		if c, ok := s.(blob.Creator); ok {
			if err := c.Create(ctx, key, strings.NewReader("x"), 1); !errors.Is(err, blob.ErrInvalidKey) {
				t.Errorf("Create(%q) = %v, want ErrInvalidKey", key, err)
			}
		}
		if b, ok := s.(blob.Batcher); ok {
			if err := b.PutUnsynced(ctx, key, strings.NewReader("x"), 1); !errors.Is(err, blob.ErrInvalidKey) {
				t.Errorf("PutUnsynced(%q) = %v, want ErrInvalidKey", key, err)
			}
		}
	}
	if got := listKeys(t, s, ""); len(got) != 0 {
		t.Fatalf("invalid keys left blobs behind: %q", got)
	}
}

// keyOfLen returns a valid key of exactly n bytes (n >= 1) made of segments
// of at most 100 bytes.
func keyOfLen(n int) string {
	var b strings.Builder
	for b.Len() < n {
		seg := min(100, n-b.Len())
		if b.Len() > 0 {
			if seg == 1 {
				// Avoid ending on "/": lengthen the previous segment instead.
				b.WriteByte('x')
				continue
			}
			b.WriteByte('/')
			seg--
		}
		b.WriteString(strings.Repeat(string(rune('a'+b.Len()%26)), seg))
	}
	return b.String()
}

// keyLimiter is implemented by stores that hold only keys shorter than
// blob.MaxKeyLen, such as an S3 store under a prefix.
type keyLimiter interface{ MaxKeyLen() int }

func testKeyLimits(t *testing.T, s blob.Store) {
	limit := blob.MaxKeyLen
	if l, ok := s.(keyLimiter); ok {
		limit = l.MaxKeyLen()
	}
	// valid: the store takes it; validKey: ValidKey accepts it.
	for _, tc := range []struct {
		key             string
		valid, validKey bool
	}{
		{keyOfLen(limit - 1), true, true},
		{keyOfLen(limit), true, true},
		{keyOfLen(limit + 1), false, limit < blob.MaxKeyLen},
		{keyOfLen(blob.MaxKeyLen + 1), false, false},
		{strings.Repeat("s", 254), true, true},
		{strings.Repeat("t", 255), true, true},
		{strings.Repeat("u", 256), false, false},
		{"x/" + strings.Repeat("v", 255), true, true},
		{"x/" + strings.Repeat("w", 256), false, false},
		{"a", true, true},
		{"0.-_", true, true},
	} {
		if err := blob.ValidKey(tc.key); (err == nil) != tc.validKey {
			t.Fatalf("ValidKey(%d-byte key) = %v, want valid %v", len(tc.key), err, tc.validKey)
		}
		err := s.Put(t.Context(), tc.key, strings.NewReader("limit"), 5)
		if !tc.valid {
			if !errors.Is(err, blob.ErrInvalidKey) {
				t.Fatalf("Put(%d-byte key) = %v, want ErrInvalidKey", len(tc.key), err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("Put(%d-byte key): %v", len(tc.key), err)
		}
		checkBlob(t, s, tc.key, []byte("limit"))
		if got := listKeys(t, s, tc.key); !slices.Equal(got, []string{tc.key}) {
			t.Fatalf("List(%d-byte key) = %d keys", len(tc.key), len(got))
		}
		if err := s.Delete(t.Context(), tc.key); err != nil {
			t.Fatalf("Delete(%d-byte key): %v", len(tc.key), err)
		}
	}
}
