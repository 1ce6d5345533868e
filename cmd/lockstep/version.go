package main

// version is the implementation version, sent in Hello messages; the
// build stamps it (-X main.version).
var version = "dev"
