package limiter

// slot returns the Redis Cluster hash slot of a key whose hash tag is tag:
// CRC16-CCITT (XMODEM) of the tag, modulo 16384, as CLUSTER KEYSLOT computes.
func slot(tag string) uint16 {
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
	return crc & 16383
}
