package main

// prefetch asks for the cache line at p without waiting for it (PREFETCHT0).
//
//go:noescape
func prefetch(p *byte)
