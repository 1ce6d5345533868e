package mem_test

import (
	"testing"

	"lockstep/storage/blob"
	"lockstep/storage/blob/blobtest"
	"lockstep/storage/blob/mem"
	"lockstep/test/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m) }

func TestConformance(t *testing.T) {
	blobtest.Run(t, func(*testing.T) blob.Store { return mem.New() })
}

func BenchmarkPut256K(b *testing.B) {
	blobtest.BenchPut(b, mem.New(), 256<<10)
}
