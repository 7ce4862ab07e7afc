package ipxe

// BQL is the byte limit and the bytes in flight it counts, for the driver's tests.
func (d *Driver) BQL() (limit, inFlight uint32) { return d.bql.Limit(), d.bql.InFlight() }
