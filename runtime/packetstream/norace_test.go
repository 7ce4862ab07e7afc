//go:build !race

package packetstream

const raceEnabled = false
