package header

import (
	"encoding/binary"
	"math/bits"
)

// Sum adds b as big-endian 16-bit words to the ones' complement accumulator acc; an odd last
// byte is padded with zero, as the Internet checksum (RFC 1071) says. The result is folded to
// 16 bits, so callers may add more words to it with +.
func Sum(b []byte, acc uint32) uint32 {
	return uint32(Fold64(Sum64(b, uint64(acc))))
}

// Fold folds the carries of acc into 16 bits.
func Fold(acc uint32) uint16 { return Fold64(uint64(acc)) }

// Checksum is the Internet checksum of b with acc already summed in (a pseudo header).
func Checksum(b []byte, acc uint32) uint16 { return ^Fold(Sum(b, acc)) }

// PseudoSum is the sum of the IPv4 pseudo header of a TCP or UDP segment.
func PseudoSum(src, dst [4]byte, protocol uint8, length int) uint32 {
	acc := Sum(src[:], 0)
	acc = Sum(dst[:], acc)
	return acc + uint32(protocol) + uint32(length)
}

// Adjust updates checksum field hc after one 16-bit word of the covered data changed from m to
// m2 (RFC 1624, equation 3: HC' = ~(~HC + ~m + m')). It never yields 0xffff for a nonzero sum,
// which is the mistake of RFC 1141's form.
func Adjust(hc, m, m2 uint16) uint16 {
	return ^Fold(uint32(^hc) + uint32(^m) + uint32(m2))
}

// Adjust4 is Adjust for a 4-byte field such as an IPv4 address.
func Adjust4(hc uint16, m, m2 [4]byte) uint16 { return ^Fold(uint32(^hc) + Diff4(m, m2)) }

// Diff4 is the ones' complement change of a 4-byte field from m to m2, unfolded (~m + m' of
// RFC 1624 for both words): changes summed once and applied to many checksums.
func Diff4(m, m2 [4]byte) uint32 {
	return uint32(^binary.BigEndian.Uint16(m[0:])) + uint32(binary.BigEndian.Uint16(m2[0:])) +
		uint32(^binary.BigEndian.Uint16(m[2:])) + uint32(binary.BigEndian.Uint16(m2[2:]))
}

// Sum64 adds b as big-endian 16-bit words (an odd last byte padded with zero) to the ones'
// complement accumulator acc and returns the new accumulator, whose Fold64 is the sum. It adds
// eight bytes a step with end-around carries (the ones' complement sum does not depend on the
// word size), so the result may use all 64 bits: pass it on as acc, or Fold64 it before adding
// anything to it with +.
func Sum64(b []byte, acc uint64) uint64 {
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

// Fold64 folds a 64-bit accumulator into 16 bits.
func Fold64(acc uint64) uint16 {
	acc = acc&0xffffffff + acc>>32
	acc = acc&0xffffffff + acc>>32
	acc = acc&0xffff + acc>>16
	acc = acc&0xffff + acc>>16
	return uint16(acc)
}

// Checksum64 is Checksum over a 64-bit accumulator.
func Checksum64(b []byte, acc uint64) uint16 { return ^Fold64(Sum64(b, acc)) }
