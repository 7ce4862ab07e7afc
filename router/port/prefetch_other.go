//go:build !amd64

package port

// prefetch does nothing where there is no prefetch instruction in our assembly.
func prefetch(*byte) {}
