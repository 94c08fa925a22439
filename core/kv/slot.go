package kv

import "github.com/shieldrt/shieldglobal/core/store"

// keySlot returns the Redis Cluster hash slot of key: CRC16 (XMODEM) of the
// key, or of its {hash tag} when it has a non-empty one, modulo 16384.
func keySlot(key string) uint16 {
	key = store.HashTag(key)
	var crc uint16
	for i := 0; i < len(key); i++ {
		crc = crc<<8 ^ crc16tab[byte(crc>>8)^key[i]]
	}
	return crc & 16383
}

var crc16tab = func() (t [256]uint16) {
	for i := range t {
		crc := uint16(i) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
		t[i] = crc
	}
	return t
}()
