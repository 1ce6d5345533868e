//go:build !linux

package crypt

// readyForScrypt runs fn: only Linux is asked for huge pages.
func readyForScrypt(_ int, fn func() error) error { return fn() }

// ScryptHugePages reports false: only Linux is asked for huge pages.
func ScryptHugePages() bool { return false }

// UseHugePagesForScrypt does nothing: only Linux is asked for huge pages.
func UseHugePagesForScrypt() {}
