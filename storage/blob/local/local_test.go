package local

import (
	"testing"

	"lockstep/storage/blob"
	"lockstep/storage/blob/blobtest"
	"lockstep/test/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m) }

func open(t testing.TB, dir string) *Store {
	t.Helper()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	blobtest.Run(t, func(t *testing.T) blob.Store { return open(t, t.TempDir()) })
}

// TestConformanceFsyncPass runs the suite with the Sync that fsyncs each
// touched path, the one platforms without syncfs use.
func TestConformanceFsyncPass(t *testing.T) {
	blobtest.Run(t, func(t *testing.T) blob.Store {
		s := open(t, t.TempDir())
		s.wholeFS = false
		return s
	})
}
