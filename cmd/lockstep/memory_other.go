//go:build !linux

package main

import "errors"

func readMemory() (rss, hwm int64) { return 0, 0 }

func resetPeak() error { return errors.New("not supported") }
