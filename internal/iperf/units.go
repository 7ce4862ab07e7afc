package iperf

import (
	"fmt"
	"strconv"
	"strings"
)

// ParseSize reads a byte count the way iperf3 reads -l, -w, -n and -k: a number with an
// optional K, M, G or T suffix (either case) that counts powers of 1024, so "16K" is 16384.
func ParseSize(s string) (uint64, error) {
	v, err := parseUnit(s, 1024)
	if err != nil {
		return 0, err
	}
	return uint64(v), nil
}

// ParseRate reads a bit rate the way iperf3 reads -b: the suffixes count powers of 1000, so
// "100M" is 100,000,000 bits/s, and a "/N" after it asks for bursts of N blocks.
func ParseRate(s string) (bitsPerSecond uint64, burst int, err error) {
	rate, b, found := strings.Cut(s, "/")
	if found {
		burst, err = strconv.Atoi(b)
		if err != nil || burst <= 0 || burst > maxBurst {
			return 0, 0, &Error{Code: CodeBadBurst}
		}
	}
	v, err := parseUnit(rate, 1000)
	if err != nil {
		return 0, 0, err
	}
	return uint64(v), burst, nil
}

func parseUnit(s string, base float64) (float64, error) {
	num, mult := s, 1.0
	if n := len(s); n > 0 {
		switch s[n-1] {
		case 'k', 'K':
			mult = base
		case 'm', 'M':
			mult = base * base
		case 'g', 'G':
			mult = base * base * base
		case 't', 'T':
			mult = base * base * base * base
		}
		if mult != 1 {
			num = s[:n-1]
		}
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || v < 0 || v*mult > 1<<62 {
		return 0, fmt.Errorf("iperf: %q is not a size such as 128K, 1.5M or 2G", s)
	}
	return v * mult, nil
}

// unitString renders n as iperf3's unit_snprintf does, always four characters of number then
// the unit: format 'a' picks bits (powers of 1000), 'A' bytes (powers of 1024), both at the
// largest unit that keeps the number under 1000 (1024); k, m, g, t and K, M, G, T fix the unit
// (-f). The callers add "s" or "s/sec", as iperf3's formats do.
func unitString(n float64, format byte) string {
	bits := format >= 'a' && format <= 'z'
	base, labels := 1024.0, [...]string{"Byte", "KByte", "MByte", "GByte", "TByte"}
	if bits {
		n *= 8
		base, labels = 1000, [...]string{"bit", "Kbit", "Mbit", "Gbit", "Tbit"}
	}
	conv := 0
	switch format {
	case 'k', 'K':
		conv = 1
	case 'm', 'M':
		conv = 2
	case 'g', 'G':
		conv = 3
	case 't', 'T':
		conv = 4
	default:
		for v := n; v >= base && conv < len(labels)-1; v /= base {
			conv++
		}
	}
	for i := 0; i < conv; i++ {
		n /= base
	}
	switch {
	case n < 9.995: // rounds to 10.0 from here on
		return fmt.Sprintf("%4.2f %s", n, labels[conv])
	case n < 99.95:
		return fmt.Sprintf("%4.1f %s", n, labels[conv])
	default:
		return fmt.Sprintf("%4.0f %s", n, labels[conv])
	}
}

// validFormat says whether f is a -f argument iperf3 accepts.
func validFormat(f byte) bool { return strings.IndexByte("kmgtKMGT", f) >= 0 }
