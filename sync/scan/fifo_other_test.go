//go:build !unix

package scan

import "errors"

func mkfifo(string) error { return errors.New("no FIFOs on this system") }
