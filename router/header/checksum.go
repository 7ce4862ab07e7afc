package header

import (
	"encoding/binary"

	"github.com/nicstack/nicstack/internal/checksum"
)

// Sum adds b as big-endian 16-bit words to the ones' complement accumulator acc; an odd last
// byte is padded with zero, as the Internet checksum (RFC 1071) says. The result is folded to
// 16 bits, so callers may add more words to it with +.
func Sum(b []byte, acc uint32) uint32 {
	return uint32(checksum.Fold(checksum.Sum(b, uint64(acc))))
}

// Fold folds the carries of acc into 16 bits.
func Fold(acc uint32) uint16 { return checksum.Fold(uint64(acc)) }

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
func Adjust4(hc uint16, m, m2 [4]byte) uint16 {
	acc := uint32(^hc)
	acc += uint32(^binary.BigEndian.Uint16(m[0:])) + uint32(binary.BigEndian.Uint16(m2[0:]))
	acc += uint32(^binary.BigEndian.Uint16(m[2:])) + uint32(binary.BigEndian.Uint16(m2[2:]))
	return ^Fold(acc)
}
