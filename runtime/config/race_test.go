//go:build race

package config

// raceEnabled shrinks the large-input test: the parsers are single-threaded, and the race
// detector makes a 10 MB parse take many seconds without checking anything more.
const raceEnabled = true
