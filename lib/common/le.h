/* SPDX-License-Identifier: BSD-3-Clause */
/* le.h - little-endian encoding of fixed-width integers, the byte order of
 * every dpg wire and file format (store protocol, exchanges, checkpoints). */
#ifndef DPG_LIB_LE_H
#define DPG_LIB_LE_H

#include <stdint.h>

static inline void dpg_le_put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static inline void dpg_le_put32(uint8_t *p, uint32_t v)
{
	dpg_le_put16(p, (uint16_t)v);
	dpg_le_put16(p + 2, (uint16_t)(v >> 16));
}

static inline void dpg_le_put64(uint8_t *p, uint64_t v)
{
	dpg_le_put32(p, (uint32_t)v);
	dpg_le_put32(p + 4, (uint32_t)(v >> 32));
}

static inline uint16_t dpg_le_get16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static inline uint32_t dpg_le_get32(const uint8_t *p)
{
	return (uint32_t)dpg_le_get16(p) | (uint32_t)dpg_le_get16(p + 2) << 16;
}

static inline uint64_t dpg_le_get64(const uint8_t *p)
{
	return (uint64_t)dpg_le_get32(p) | (uint64_t)dpg_le_get32(p + 4) << 32;
}

#endif
