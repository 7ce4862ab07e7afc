//go:build race

package packetstream

const raceEnabled = true
