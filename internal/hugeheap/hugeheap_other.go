//go:build !linux

package hugeheap

// Advise does nothing and reports false: only Linux is asked for huge
// pages.
func Advise() bool { return false }
