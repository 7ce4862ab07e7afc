//go:build !amd64

package main

// prefetch does nothing where there is no prefetch instruction in our assembly.
func prefetch(*byte) {}
