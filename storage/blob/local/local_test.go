package local

import (
	"testing"

	"go.uber.org/goleak"

	"lockstep/storage/blob"
	"lockstep/storage/blob/blobtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

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
