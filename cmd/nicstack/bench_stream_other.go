//go:build !amd64

package main

func fill(b, tmpl []byte) { copy(b, tmpl) }

func prefetchW([]byte) {}
