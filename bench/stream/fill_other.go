//go:build !amd64

package stream

// fillNT leaves all of b to fill's copy: only amd64 has the non-temporal assembly.
func fillNT(b, tmpl []byte) int { return 0 }

// prefetchW does nothing: the store waits for the line as it does without the hint.
func prefetchW([]byte) {}
