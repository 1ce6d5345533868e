//go:build !linux

package main

// adviseHugeHeap does nothing and reports false: only Linux is asked for huge
// pages.
func adviseHugeHeap() bool { return false }
