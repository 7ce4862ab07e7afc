//go:build !amd64

package bench

func fill(b, tmpl []byte) { copy(b, tmpl) }

func prefetchW([]byte) {}
