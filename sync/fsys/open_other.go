//go:build !linux

package fsys

import (
	"io/fs"
	"os"
	"time"
)

// haveOpenBeneath: no single call here opens a name without following any
// symlink; every open goes the long way.
const haveOpenBeneath = false

func openBeneath(*os.File, string, func(fs.FileMode) error) *os.File { return nil }

func createBeneath(*os.File, string) (*os.File, bool) { return nil, false }
func chmodBeneath(*os.File, string, fs.FileMode) bool { return false }
func chtimesBeneath(*os.File, string, time.Time) bool { return false }
func removeBeneath(*os.File, string) bool             { return false }
func renameBeneath(*os.File, string, string) bool     { return false }

func renameBeneathFlags(*os.File, string, string, uint) (bool, error) { return false, nil }

const (
	renameNoReplace = 1
	renameExchange  = 2
)

func openRWBeneath(*os.File, string) (*os.File, bool) { return nil, false }

func setModeTimeOpen(*os.File, fs.FileMode, time.Time) bool { return false }
