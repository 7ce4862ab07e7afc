// Package checksum computes the Internet checksum (RFC 1071) for everything that builds or
// checks frames: the router's headers, the driver's software offloads, the TAP's joined
// segments.
package checksum

import (
	"encoding/binary"
	"math/bits"
)

// Sum adds b as big-endian 16-bit words (an odd last byte padded with zero) to the ones'
// complement accumulator acc and returns the new accumulator, whose Fold is the sum. It adds
// eight bytes a step with end-around carries (the ones' complement sum does not depend on the
// word size), so the result may use all 64 bits: pass it on as acc, or Fold it before adding
// anything to it with +.
func Sum(b []byte, acc uint64) uint64 {
	var carry uint64
	for ; len(b) >= 8; b = b[8:] {
		acc, carry = bits.Add64(acc, binary.BigEndian.Uint64(b), carry)
	}
	acc, carry = bits.Add64(acc, 0, carry)
	acc += carry
	for ; len(b) >= 2; b = b[2:] {
		acc, carry = bits.Add64(acc, uint64(binary.BigEndian.Uint16(b)), 0)
		acc += carry
	}
	if len(b) == 1 {
		acc, carry = bits.Add64(acc, uint64(b[0])<<8, 0)
		acc += carry
	}
	return acc
}

// Fold folds an accumulator into 16 bits.
func Fold(acc uint64) uint16 {
	acc = acc&0xffffffff + acc>>32
	acc = acc&0xffffffff + acc>>32
	acc = acc&0xffff + acc>>16
	acc = acc&0xffff + acc>>16
	return uint16(acc)
}

// Checksum is the Internet checksum of b with acc (a pseudo header's sum, say) summed in.
func Checksum(b []byte, acc uint64) uint16 { return ^Fold(Sum(b, acc)) }
