// Package keyslot computes Redis Cluster hash slots, so stockguard can group
// the keys of one call by the server that owns them.
package keyslot

// Count is the number of Redis Cluster hash slots.
const Count = 16384

// Slot returns the hash slot of every key whose hash tag is tag: the
// CRC16-CCITT (XMODEM) of the tag, modulo Count, as CLUSTER KEYSLOT
// computes it.
func Slot(tag string) int {
	var crc uint16
	for i := 0; i < len(tag); i++ {
		crc ^= uint16(tag[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) % Count
}
