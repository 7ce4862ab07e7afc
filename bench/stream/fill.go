package stream

// fill writes tmpl into b, which is at least as long: the part fillNT takes with
// non-temporal stores, the rest with copy. It is the one way the source writes a frame, on
// every CPU; only fillNT depends on the CPU.
func fill(b, tmpl []byte) {
	n := fillNT(b, tmpl)
	copy(b[n:], tmpl[n:len(b)])
}
